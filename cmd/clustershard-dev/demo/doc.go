// Package demo runs `clustershard-dev demo` (and `make demo`): a real local
// management control plane with remote clusters, several replica processes of
// this binary, RemoteClusters and replicated objects, and a live ownership
// table while one replica is killed and restarted. It cleans up everything it
// started on exit or Ctrl-C.
package demo
