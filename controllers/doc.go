// Package controllers groups the management-side and remote-side controllers
// of clustershard; each controller lives in a sub-package of its own.
package controllers
