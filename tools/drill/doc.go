// Package drill runs chaos drills against real clustershard replica
// processes on a local control plane, one fault at a time, and checks the
// invariants of the ownership protocol afterwards (I1 no double ownership,
// I2 bounded recovery, I3 convergence, I4 liveness) from the replicas'
// ownership journals and the clusters' state.
package drill
