// Package testenv gives a test package one real control plane (management plus
// remotes, from package localcluster) for all its tests: TestMain starts it once
// with Run, and it is torn down after the tests, on failure and on an interrupt.
package testenv
