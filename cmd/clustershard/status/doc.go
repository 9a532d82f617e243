// Package status builds the ownership view that `clustershard status` and the
// demo print: one row per RemoteCluster (owner from its Lease, Lease age,
// Connected, Ready, replicated objects) and one per replica (owned count,
// membership age, leaving or expired).
package status
