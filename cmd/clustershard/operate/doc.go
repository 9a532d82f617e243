// Package operate holds the operator's commands on a running fleet:
// cordon, uncordon and drain a replica (an annotation on its membership
// Lease that keeps it out of the ring), and move a RemoteCluster to a
// replica (a pin in its spec.placement). The replicas do the work by their
// normal ordered hand-over; these functions only write intent and wait for
// it to show in the Leases.
package operate
