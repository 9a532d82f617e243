// Package shard is the shard coordinator: membership Leases, the
// consistent-hash ring over live members and one Lease per RemoteCluster, so
// that at any instant at most one replica owns (runs a remote manager for, and
// writes to) each remote cluster.
//
// # The protocol
//
// Membership. Each replica holds a membership Lease of its own in the
// controller namespace (membership.go), renewed by client-go's leader
// elector: lease duration 15s, renew deadline 10s, retry period 2s by
// default. The holder identity is the replica's name and an incarnation,
// name@incarnation (incarnation.go), so that two processes started with one
// name never both count as the member: the second waits until the first's
// Lease is gone. The live members are the membership Leases not expired by
// locally observed time (observer.go).
//
// Settle. At a cold start (no live replica holds a cluster Lease: the
// fleet starts or restarts as a whole) a replica takes nothing until the
// ring has ExpectedReplicas members, or its members stayed unchanged for
// SettleWindow, or SettleTimeout passed (settle.go): replicas starting
// together do not take clusters only to hand them over a second later.
//
// Assignment. A ring over the live members that are neither leaving nor
// cordoned (ring.go: rendezvous hashing with bounded loads, as a stable
// matching, honouring each cluster's placement) maps each
// RemoteCluster name to one replica; every replica computes the same answer
// from the same members. A joining replica is a member only once it is
// ready.
//
// Cluster Leases. Each RemoteCluster has one Lease (leasename.go: named
// after the cluster, hashed when too long) whose holder is the process that
// owns it. Each pass of the coordinator (coordinator.go, step) applies the
// rules:
//
//  1. Acquire only what is assigned and free. A replica acquires a cluster
//     Lease only when the ring assigns the cluster to it and the Lease is
//     free: absent, released, expired by locally observed time (never by
//     comparing the Lease's renewTime with the local clock), marked
//     abandoned and unchanged for a lease duration, held by a process whose
//     membership has expired (confirmed by a fresh read), or held by this
//     very process. Whatever the Lease says, a replica does not take a
//     cluster again while a write it made to it under an earlier authority
//     may still land (doubt.go). A Lease deleted or overwritten under a live holder is
//     free only once unchanged for a lease duration, since that holder may
//     still run the cluster until it notices. The acquisition is an update
//     with the Lease's resourceVersion, so of two contenders one fails.
//  2. Spawn after acquire, stop before release. The Handler's Acquired runs
//     after the Lease is held; a remote manager runs only under a held
//     Lease.
//  3. Hand over by drain, stop, then release. When the ring moves a cluster
//     away (or this replica shuts down or is cordoned), the owner first
//     drains it (handover.go, drain): no new WithOwnership callback starts,
//     and those already running (an install, a copy, a status write) finish
//     within StopTimeout, their writes still passing the fence: the Lease
//     is held and membership valid, so the work is still this replica's
//     alone, and an install on its way ends deployed instead of cut. Then
//     the fence closes, the owner stops its remote manager (bounded by
//     StopTimeout), then
//     releases the Lease, and the new owner, watching Leases, acquires it at
//     once. Remote writes of the cluster still on their way are waited for,
//     within the same bound. If the stop times out, or a write to the
//     cluster is still in flight or in doubt (doubt.go), the Lease is left
//     to expire instead. Planned hand-overs are paced (window.go): a
//     replica starts the hand-over of at most HandoverWindow clusters per
//     successor whose new manager it has not yet seen running (the
//     successor marks the Lease once it runs it), so each cluster waits for
//     its own spawn rather than a queue of them, and the clusters not yet
//     let go keep running, under their Lease, on the old owner.
//  4. Self-fencing. A replica whose membership was not renewed within the
//     renew deadline writes nothing from then on. It waits a grace more
//     (RenewalGrace: a quarter of the margin to the lease duration) for the
//     answer of a renewal on its way: one that comes within it keeps the
//     epoch and the writes go on (a renewal late under load does not stop
//     and re-spawn every cluster); past it every remote manager stops and
//     none starts until it renews again, in a new epoch. Others wait a lease
//     duration from when they saw its last renewal, and confirm by a fresh
//     read, which sees a renewal answered by then. Every remote write
//     first asks WriteDeadline, on the local monotonic clock, whether
//     ownership still holds and until when;
//     a replica paused (GC, SIGSTOP, a frozen VM) that wakes up late writes
//     nothing. A write already on its way when ownership ends is cut by its
//     deadline; one held by the network and delivered later is refused by
//     the remote API server itself (the ownership epoch, internal/remotefence).
//  5. Graceful shutdown. On SIGTERM the replica leaves the ring (annotates
//     its membership Lease as leaving), hands every cluster over by rule 3
//     (its passes go on, out of its own ring, paced by the window until only
//     the worst case of one hand-over is left of the shutdown timeout, then
//     all that is left at once), then releases
//     its membership. Moves while rebalancing are rate limited
//     (MovesPerSecond).
//  6. Write budget. Cluster Leases are not renewed: a cluster Lease is valid
//     while its holder's membership is, so steady-state ownership writes are
//     one membership renewal per replica and retry period, whatever the
//     number of clusters.
//
// The invariant the drills check: at no instant do two replicas run a
// remote manager, or write, for the same RemoteCluster.
//
// Nothing is stuck silently: a cluster no replica may run (assigned to a
// replica that is not live, a Lease held by a live process that does not
// run it, an unreadable Lease) is counted in clustershard_unowned_clusters,
// reported on its sources by one replica (Reporter) and listed by
// clustershard status.
//
// The coordinator knows nothing of the registry: it tells a Handler of the
// clusters it gains and loses, and the registry asks it, as its Fence,
// whether a write may go. The assembly (package replica) joins them.
package shard
