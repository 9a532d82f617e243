// Package bench is the benchmark harness of `make bench`: five scenarios
// (ownership write cost against one LeaderElector per cluster, hand-over
// gaps, balance and movement, memory and start-up, replication throughput),
// each measured next to its baseline in the same run on a local control
// plane with real API servers and replica processes. Results are written as
// JSON under bench/results, drawn under bench/plots and summarised in
// bench/RESULTS.md (command bench/cmd/bench); the memory scenario's pprof
// profiles of its replicas go to bench/profiles.
package bench
