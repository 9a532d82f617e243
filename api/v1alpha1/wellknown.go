package v1alpha1

// Well-known labels, annotations, finalizers and field managers of
// clustershard, on Leases, RemoteClusters, sources and remote copies: the
// one place each key is defined.
const (
	// ClusterAnnotation on a cluster Lease holds the full cluster name.
	ClusterAnnotation = "clustershard.io/cluster"

	// LeavingAnnotation on a membership Lease marks a replica that is handing
	// over its clusters before it exits: alive, but out of the ring.
	LeavingAnnotation = "clustershard.io/leaving"

	// CordonedAnnotation on a membership Lease keeps its replica out of the
	// ring (clustershard drain / cordon): alive, holding no cluster, until
	// the annotation is removed (clustershard uncordon). The value says who
	// cordoned it and when. It outlives restarts of the replica: the
	// membership elector keeps a Lease's annotations.
	CordonedAnnotation = "clustershard.io/cordoned"

	// HandoverReasonAnnotation on a released cluster Lease says why its last
	// holder handed it over (one of the TransferReason values); the next
	// holder reports it in its transfer event.
	HandoverReasonAnnotation = "clustershard.io/handover-reason"

	// RingLabel on a membership Lease publishes, with every renewal, a hash
	// of the ring its holder computed last (see shard.RingHash), so that
	// clustershard status can tell replicas that disagree on the ring.
	RingLabel = "clustershard.io/ring"

	// TrackedLabel on a membership Lease publishes, with every renewal, how
	// many cluster Leases its holder tracks as its own, so that clustershard
	// status can tell Leases whose holder does not track them.
	TrackedLabel = "clustershard.io/tracked"

	// AbandonedAnnotation on a cluster Lease marks one whose holder could not
	// confirm its manager stopped: others take it once they have seen it
	// unchanged for a lease duration.
	AbandonedAnnotation = "clustershard.io/abandoned"

	// ReleasedByAnnotation on a cluster Lease names the replica that
	// released it (holder cleared). A Lease cleared by anyone else, or
	// deleted, while a live replica held it is free only after a lease
	// duration unchanged: that replica may still run the cluster.
	ReleasedByAnnotation = "clustershard.io/released-by"

	// ManagerRunningAnnotation on a held cluster Lease names the holder
	// (name@incarnation) once its remote manager for the cluster runs. A
	// releasing replica paces its hand-overs by it (shard.Options
	// HandoverWindow): it lets go of the next cluster for a successor only
	// when the successor runs the ones it took. A value that is not the
	// Lease's holder says nothing.
	ManagerRunningAnnotation = "clustershard.io/manager-running"

	// IncarnationAnnotation on a held cluster Lease names the holder's
	// incarnation; spec.holderIdentity keeps the bare replica name, which
	// replicas of versions without incarnations read as a live holder.
	IncarnationAnnotation = "clustershard.io/holder-incarnation"

	// LeaseRoleLabel tells membership and cluster Leases apart.
	LeaseRoleLabel = "clustershard.io/lease-role"

	// LeaseDurationLabel and RenewDeadlineLabel on a membership Lease
	// publish its holder's timings (Go durations, "15s"), written with every
	// renewal: an observer judges the holder expired only after the longer
	// of its own and the holder's lease duration, so replicas started with
	// different timing flags never overlap.
	LeaseDurationLabel = "clustershard.io/lease-duration"

	// RenewDeadlineLabel publishes the renew deadline; see LeaseDurationLabel.
	RenewDeadlineLabel = "clustershard.io/renew-deadline"

	// ControlledByLabel marks a remote copy made by clustershard.
	ControlledByLabel = "clustershard.io/controlled-by"

	// ControlledByValue is ControlledByLabel's value.
	ControlledByValue = "clustershard"

	// CopyClusterLabel on a remote copy names the RemoteCluster it was copied to.
	CopyClusterLabel = "clustershard.io/remote-cluster"

	// WrittenByAnnotation on a remote copy names the replica that last wrote it.
	WrittenByAnnotation = "clustershard.io/written-by"

	// SourceUIDAnnotation on a remote copy is the UID of its source.
	SourceUIDAnnotation = "clustershard.io/source-uid"

	// SpecHashAnnotation on a remote copy is SpecHash of the source it was
	// written from: how the Recreate strategy tells that a copy's spec must
	// change without comparing it with what remote defaulting made of it.
	SpecHashAnnotation = "clustershard.io/spec-hash"

	// ReplicatedToAnnotation on a source names the cluster its copy lives in.
	ReplicatedToAnnotation = "clustershard.io/replicated-to"

	// ReleaseAnnotation on a source ("true") lets an operator release a source
	// whose remote cluster is gone for good: its finalizer is removed without
	// deleting the remote copy.
	ReleaseAnnotation = "clustershard.io/release"

	// OutcomeAnnotation on a source holds the outcome of its replication as
	// JSON (Outcome): a detail no status schema can prune, kept even for a
	// kind whose conditions keep only type, status and reason.
	OutcomeAnnotation = "clustershard.io/remote-synced"

	// InstalledByLabel ("clustershard") marks what clustershard created in a
	// remote cluster: the install namespace, the CRDs it applied, and the
	// namespaces it created for copies.
	InstalledByLabel = "clustershard.io/installed-by"

	// InstallHashAnnotation on a CRD clustershard copied into a remote
	// cluster is the hash of what it applied: a new owner that finds it
	// unchanged (and the CRD established) applies nothing.
	InstallHashAnnotation = "clustershard.io/install-hash"

	// RemoteFinalizersAnnotation on a source being deleted lists the
	// finalizers its remote copy still carries (say Chaos Mesh's
	// chaos-mesh/records while it recovers the experiment).
	RemoteFinalizersAnnotation = "clustershard.io/remote-finalizers"

	// SourceFinalizer is held on sources while their copy exists.
	SourceFinalizer = "clustershard.io/replicate"

	// FieldManager is the field manager of the remote copies (server-side apply).
	FieldManager = "clustershard"

	// RemoteClusterFinalizer is this controller's finalizer on RemoteClusters.
	RemoteClusterFinalizer = "clustershard.io/remotecluster"
)
