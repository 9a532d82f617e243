// Package bench holds the benchmark harness of `make bench`; results are
// written under bench/results and summarised in bench/RESULTS.md.
package bench
