// Package remotecopy is the library of replicated kinds: what the replicate
// (management side) and monitor (remote side) controllers share. It holds
// the replicated kinds and the shape of their status, the remote-cluster
// field, the labels that mark a remote copy, how a copy is derived from its
// source, and the predicate local controllers use to skip objects bound for
// a remote cluster. It decides nothing about ownership.
package remotecopy
