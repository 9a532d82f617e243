// Package metrics holds every Prometheus collector of clustershard, named
// clustershard_*, registered explicitly into controller-runtime's metrics
// registry by Register. Labels are bounded: the only series labelled with a
// cluster name are those of ClusterSeries, which a user can turn off.
package metrics

import (
	"errors"

	"github.com/clustershard/clustershard/api/v1alpha1"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	// RingMembers is the number of replicas in this replica's ring.
	RingMembers = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clustershard_ring_members",
		Help: "Replicas in the consistent-hash ring as seen by this replica (live, not leaving).",
	})
	// OwnedClusters is the number of clusters this replica owns.
	OwnedClusters = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clustershard_owned_clusters",
		Help: "RemoteClusters whose Lease this replica holds in its current membership epoch.",
	})
	// Clusters is the number of RemoteClusters this replica sees.
	Clusters = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clustershard_clusters",
		Help: "RemoteClusters in the management cluster, as seen by this replica.",
	})
	// UnownedClusters is the number of clusters for which no replica may be
	// writing: Lease absent or released, or held by a replica whose
	// membership has not been renewed within the renew deadline (by the
	// protocol it has fenced itself).
	UnownedClusters = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clustershard_unowned_clusters",
		Help: "RemoteClusters with no replica allowed to run their manager (Lease absent or released, or its holder's membership not renewed within the renew deadline), as seen by this replica.",
	})
	// Fenced is 1 while this replica's membership is not valid.
	Fenced = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clustershard_fenced",
		Help: "1 while this replica's membership is not valid and it writes to no remote cluster, else 0.",
	})
	// RemoteUnfenced is how many clusters owned here run without the remote
	// epoch fence (their API server does not refuse late writes of earlier
	// owners: no ValidatingAdmissionPolicy API, or the kubeconfig may not
	// impersonate or write policies).
	RemoteUnfenced = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clustershard_remote_unfenced_clusters",
		Help: "Clusters owned by this replica whose remote API server does not enforce the ownership epoch (RemoteFenced=False on the RemoteCluster says why): a write held on the way and delivered after a take-over could still land there.",
	})
	// MembershipLateRenewals counts membership renewals answered after
	// their validity had ended, by outcome.
	MembershipLateRenewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clustershard_membership_late_renewals_total",
		Help: "Membership renewals answered after the validity of the one before had ended (writes fenced meanwhile), by outcome: kept (within the grace, ownership stood) or voided (past it: every cluster stopped and is taken again).",
	}, []string{"outcome"})
	// MembershipRenewFailures counts failed membership Lease renewals.
	MembershipRenewFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "clustershard_membership_renew_failures_total",
		Help: "Membership Lease renewals that failed.",
	})
	// LeaseTransitions counts cluster Lease acquisitions, take-overs of
	// expired Leases (counted as acquired too), releases, abandonments (stop
	// timed out) and losses (taken or changed by others, or membership
	// lapsed).
	LeaseTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clustershard_cluster_lease_transitions_total",
		Help: "Cluster Lease transitions made or seen by this replica, by event: acquired, expired (acquired from a holder whose membership expired), released, abandoned, lost.",
	}, []string{"event"})
	// Transfers counts changes of owner this replica made (as the new
	// owner), by reason.
	Transfers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clustershard_cluster_transfers_total",
		Help: "Clusters this replica took over, counted when the new remote manager first runs, by reason: Rebalance, Drain, Shutdown, Placement, CrashTakeover, Abandoned, FirstOwner.",
	}, []string{"reason"})
	// CredentialRotations counts kubeconfig changes of running clusters, by
	// how they were applied.
	CredentialRotations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clustershard_kubeconfig_changes_total",
		Help: "Kubeconfig changes of clusters whose remote manager ran, by how they were applied: in-place (new credentials swapped under the running manager) or restart (server, CA or user changed, or credentials that cannot be swapped).",
	}, []string{"applied"})
	// Cordoned is 1 while this replica is cordoned (kept out of the ring).
	Cordoned = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clustershard_replica_cordoned",
		Help: "1 while this replica is cordoned (clustershard drain): alive, out of the ring, owning no cluster; 0 otherwise.",
	})
	// OwnershipWrites counts every API write of the ownership protocol.
	OwnershipWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clustershard_ownership_writes_total",
		Help: "API writes (attempts) made by the ownership protocol, by verb and by Lease kind (membership or cluster).",
	}, []string{"verb", "resource"})
	// HandoverDrains counts the planned hand-overs that found work under way
	// (an install, a copy, a status write) and let it finish before the
	// fence closed, by outcome: finished within the stop timeout, or cut.
	HandoverDrains = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clustershard_handover_drains_total",
		Help: "Planned hand-overs that waited for the work under way on the cluster (installs, copies, status writes) before fencing it, by outcome: finished (within the stop timeout) or cut (still running then; the successor recovers what it left).",
	}, []string{"outcome"})
	// HandoverWindow is how many clusters this replica let go of whose
	// successor's manager it has not seen running yet (shard.Options
	// HandoverWindow paces planned hand-overs by it).
	HandoverWindow = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clustershard_handover_window_clusters",
		Help: "Clusters this replica is handing over or let go of whose new manager it has not yet seen running on the successor; at most --handover-window per successor.",
	})
	// HandoverWindowTimeouts counts the clusters let go whose successor did
	// not mark its manager running within --handover-window-timeout.
	HandoverWindowTimeouts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "clustershard_handover_window_timeouts_total",
		Help: "Clusters this replica let go of whose successor did not show its manager running within --handover-window-timeout (an older successor, a remote that does not answer, a spawn that failed); the next hand-over went ahead without it.",
	})
	// HandoverDuration is the time from the moment this replica saw a cluster
	// assigned to it until its remote manager was spawned here.
	HandoverDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "clustershard_handover_duration_seconds",
		Help:    "Seconds from the ring assigning a cluster to this replica to its remote manager running here.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 20, 30, 60},
	})
	// SpawnStepDuration is how long each step of bringing up a cluster's
	// remote manager took.
	SpawnStepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "clustershard_spawn_step_duration_seconds",
		Help: "Seconds each step of bringing up a cluster's remote manager took on this replica, by step: " +
			"probe (the remote /version), epoch (raising the ownership epoch in the remote), install (spec.install: CRDs, Helm), " +
			"start (the remote manager until its caches synced and its controllers started).",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30},
	}, []string{"step"})
	// OwnershipPassPhase is how long each phase of the coordinator's
	// passes took.
	OwnershipPassPhase = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "clustershard_ownership_pass_phase_seconds",
		Help: "Seconds each phase of the ownership coordinator's passes took on this replica, by phase: observe (read the Leases and RemoteClusters), " +
			"losses (clusters whose Lease changed), handovers (drains, stops and releases started), sweep (Leases nobody tracks), acquire (free Leases taken and their spawns started), total (the whole pass). " +
			"A pass waits for the one before it, so a slow pass delays every acquisition after a release.",
		Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10},
	}, []string{"phase"})
	// UnmanagedDuration is how long a cluster went without a running remote
	// manager, observed when this replica's manager for it starts.
	UnmanagedDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "clustershard_cluster_unmanaged_duration_seconds",
		Help:    "Seconds a cluster spent with no running remote manager, observed when one starts here: from the release of its Lease, the last seen renewal of its dead holder, or its first sight.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 20, 30, 60, 120, 300},
	})
	// RemoteManagers counts this replica's remote managers by state.
	RemoteManagers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "clustershard_remote_managers",
		Help: "Remote managers in this replica's registry, by state (Starting, Running, Unhealthy, Failed, Stopping).",
	}, []string{"state"})
	// RemoteProbeDuration is the latency of remote /version probes.
	RemoteProbeDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "clustershard_remote_probe_duration_seconds",
		Help:    "Latency of the periodic /version probes of remote API servers.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
	})
	// HelmOperations counts the Helm operations of spec.install.helm.
	HelmOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clustershard_helm_operations_total",
		Help: "Helm operations on spec.install.helm releases in remote clusters, by operation (install, upgrade, uninstall, recover: a release left pending marked failed; check: the release read and found up to date, or not readable) and result (success, failure, interrupted: a write ended without a decision, so no failed revision was recorded and the next try redoes it).",
	}, []string{"operation", "result"})
	// RemoteWritesInDoubt counts remote writes sent without an answer.
	RemoteWritesInDoubt = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "clustershard_remote_writes_in_doubt_total",
		Help: "Remote writes sent that got no answer (cut at the ownership fence deadline, or the connection broke): they may still be processed until their server-side timeout, so their cluster's Lease is abandoned (left to expire) rather than released meanwhile.",
	})
	// RemoteProbeFailures counts failed remote probes.
	RemoteProbeFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "clustershard_remote_probe_failures_total",
		Help: "Failed /version probes of remote API servers.",
	})
	// ClusterEventsDropped counts cluster events a controller's full
	// event buffer missed.
	ClusterEventsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "clustershard_cluster_events_dropped_total",
		Help: "Cluster events (acquired, lost, a remote manager's state change) a controller missed because its buffer was full; the sources of those clusters are re-checked at --recheck-interval instead of at once.",
	})
)

// Lease transition events, the values of LeaseTransitions' label.
const (
	LeaseAcquired  = "acquired"
	LeaseExpired   = "expired"
	LeaseReleased  = "released"
	LeaseAbandoned = "abandoned"
	LeaseLost      = "lost"
)

// Helm operations and results, the values of HelmOperations' labels.
const (
	HelmInstall   = "install"
	HelmUpgrade   = "upgrade"
	HelmUninstall = "uninstall"
	HelmRecover   = "recover"
	HelmCheck     = "check"
	ResultSuccess = "success"
	ResultFailure = "failure"
	// ResultInterrupted: a write of the operation ended without a
	// decision; it recorded no failed revision and is redone.
	ResultInterrupted = "interrupted"
)

// Collectors returns every collector of the package.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		RingMembers, OwnedClusters, Clusters, UnownedClusters, Fenced, MembershipRenewFailures, MembershipLateRenewals, LeaseTransitions, Transfers, Cordoned, CredentialRotations,
		OwnershipWrites, HandoverDrains, HandoverWindow, HandoverWindowTimeouts, HandoverDuration, SpawnStepDuration, OwnershipPassPhase, UnmanagedDuration, RemoteManagers, RemoteProbeDuration, RemoteProbeFailures,
		ReplicatedObjects, ReplicationLag, ReplicationErrors, HelmOperations, RemoteWritesInDoubt, RemoteUnfenced,
		ClusterEventsDropped,
	}
}

// Phases of OwnershipPassPhase.
const (
	PassObserve   = "observe"
	PassLosses    = "losses"
	PassHandovers = "handovers"
	PassSweep     = "sweep"
	PassAcquire   = "acquire"
	PassTotal     = "total"
)

// Outcomes of HandoverDrains.
const (
	DrainFinished = "finished"
	DrainCut      = "cut"
)

// Outcomes of MembershipLateRenewals.
const (
	LateRenewalKept   = "kept"
	LateRenewalVoided = "voided"
)

// Steps of SpawnStepDuration.
const (
	SpawnProbe   = "probe"
	SpawnEpoch   = "epoch"
	SpawnInstall = "install"
	SpawnStart   = "start"
)

// initLabels creates every known label combination at zero, so a series
// exists (and rate() works) before its first event.
func initLabels() {
	for _, e := range []string{LeaseAcquired, LeaseExpired, LeaseReleased, LeaseAbandoned, LeaseLost} {
		LeaseTransitions.WithLabelValues(e)
	}
	for _, v := range []string{"create", "update", "patch"} {
		OwnershipWrites.WithLabelValues(v, "membership")
	}
	for _, v := range []string{"create", "update", "patch", "delete"} {
		OwnershipWrites.WithLabelValues(v, "cluster")
	}
	for _, s := range []string{SpawnProbe, SpawnEpoch, SpawnInstall, SpawnStart} {
		SpawnStepDuration.WithLabelValues(s)
	}
	for _, s := range []string{"Starting", "Running", "Unhealthy", "Failed", "Stopping"} {
		RemoteManagers.WithLabelValues(s)
	}
	for _, r := range []string{v1alpha1.TransferRebalance, v1alpha1.TransferDrain, v1alpha1.TransferShutdown, v1alpha1.TransferPin,
		v1alpha1.TransferCrashTakeover, v1alpha1.TransferAbandoned, v1alpha1.TransferFirstOwner} {
		Transfers.WithLabelValues(r)
	}
	for _, o := range []string{DrainFinished, DrainCut} {
		HandoverDrains.WithLabelValues(o)
	}
	for _, o := range []string{LateRenewalKept, LateRenewalVoided} {
		MembershipLateRenewals.WithLabelValues(o)
	}
	for _, a := range []string{"in-place", "restart"} {
		CredentialRotations.WithLabelValues(a)
	}
	for _, op := range []string{HelmInstall, HelmUpgrade, HelmUninstall, HelmRecover, HelmCheck} {
		HelmOperations.WithLabelValues(op, ResultSuccess)
		HelmOperations.WithLabelValues(op, ResultFailure)
	}
}

// Register registers every collector into reg; collectors already there are
// fine (several replicas in one test process share them).
func Register(reg prometheus.Registerer) error {
	initLabels()
	for _, c := range Collectors() {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}

// RegisterClusterSeries registers ClusterSeries into reg once.
func RegisterClusterSeries(reg prometheus.Registerer) {
	_ = reg.Register(ClusterSeries) // only AlreadyRegistered can happen: its descriptors are fixed
}
