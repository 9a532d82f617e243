// Package replica wires one clustershard replica: the management manager,
// the shard coordinator, the registry of remote managers and the
// controllers, so the binary and the tests run the same assembly.
package replica
