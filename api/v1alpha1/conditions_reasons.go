package v1alpha1

// Condition types and reasons that are not RemoteCluster condition types:
// the condition clustershard keeps on sources, and the reasons (also event
// reasons) of RemoteCluster and source conditions. The one place each is
// defined.
const (
	// ConditionRemoteSynced is the condition set on sources.
	ConditionRemoteSynced = "RemoteSynced"

	// ReasonSecretNotFound is a condition reason.
	ReasonSecretNotFound = "SecretNotFound"

	// ReasonSecretKeyNotFound is a condition reason.
	ReasonSecretKeyNotFound = "SecretKeyNotFound"

	// ReasonSecretNamespaceNotAllowed is a condition reason: the kubeconfig
	// Secret lives in a namespace the replicas may not read Secrets from.
	ReasonSecretNamespaceNotAllowed = "SecretNamespaceNotAllowed"

	// ReasonUnreachable is a condition reason.
	ReasonUnreachable = "Unreachable"

	// ReasonReachable is a condition reason.
	ReasonReachable = "Reachable"

	// ReasonInstallFailed is a condition reason.
	ReasonInstallFailed = "InstallFailed"

	// ReasonInstallPending is a condition reason: spec.install changed while
	// the remote API server does not answer; it is installed once it does.
	ReasonInstallPending = "InstallPending"

	// ReasonInstalled is a condition reason.
	ReasonInstalled = "Installed"

	// ReasonNothingToInstall is a condition reason.
	ReasonNothingToInstall = "NothingToInstall"

	// ReasonSpawnFailed is a condition reason.
	ReasonSpawnFailed = "SpawnFailed"

	// ReasonManagerRunning is a condition reason.
	ReasonManagerRunning = "ManagerRunning"

	// ReasonManagerFailed is a condition reason.
	ReasonManagerFailed = "ManagerFailed"

	// ReasonNotConnected is a condition reason.
	ReasonNotConnected = "NotConnected"

	// ReasonLeaseHeld is a condition reason.
	ReasonLeaseHeld = "LeaseHeld"

	// ReasonCRDKept: cleanupPolicy Delete kept a CRD clustershard created
	// because it holds objects clustershard did not create.
	ReasonCRDKept = "CRDKept"

	// ReasonCleanupAbandoned: cleanupPolicy Delete could not clean up within
	// CleanupTimeout; the RemoteCluster was let go without it.
	ReasonCleanupAbandoned = "CleanupAbandoned"

	// ReasonFenceFailed is the reason when the ownership epoch could not be
	// raised in the remote cluster (it did not answer, or refused for another reason than the ones
	// remotefence reports); nothing is written there until it is.
	ReasonFenceFailed = "FenceFailed"

	// ReasonEpochSuperseded is the reason of the event when the running
	// manager's epoch was superseded in the remote cluster.
	ReasonEpochSuperseded = "EpochSuperseded"

	// ReasonChartPending is a condition reason.
	ReasonChartPending = "ChartPending"

	// ReasonHelmInstalled is a condition reason.
	ReasonHelmInstalled = "HelmInstalled"

	// ReasonHelmUpgraded is a condition reason.
	ReasonHelmUpgraded = "HelmUpgraded"

	// ReasonHelmRecovered is a condition reason.
	ReasonHelmRecovered = "HelmRecovered"

	// ReasonHelmUninstall is a condition reason.
	ReasonHelmUninstall = "HelmUninstalled"

	// ReasonHelmInterrupted is the reason of Installed when a Helm
	// operation stopped at a write that ended without a decision (cut by
	// the ownership fence, a server-side timeout, a broken connection): it
	// recorded no failed revision, and the next try redoes it.
	ReasonHelmInterrupted = "HelmInterrupted"

	// ReasonHelmFailed is a condition reason.
	ReasonHelmFailed = "HelmFailed"

	// ReasonSynced is a condition reason.
	ReasonSynced = "Synced"

	// ReasonClusterNotFound is a condition reason.
	ReasonClusterNotFound = "ClusterNotFound"

	// ReasonClusterNotReady is a condition reason.
	ReasonClusterNotReady = "ClusterNotReady"

	// ReasonClusterUnowned: no replica runs the source's cluster (its Lease
	// is free and not acquired, or names a replica that does not renew)
	// for longer than UnownedGrace; written by one replica, retried.
	ReasonClusterUnowned = "ClusterUnowned"

	// ReasonSyncFailed is a condition reason.
	ReasonSyncFailed = "SyncFailed"

	// ReasonDeleting is a condition reason.
	ReasonDeleting = "DeletingRemoteCopy"

	// ReasonWebhookRefused: an admission webhook of the remote cluster
	// refused the copy.
	ReasonWebhookRefused = "WebhookRefused"

	// ReasonWebhookUnavailable: a webhook of the remote cluster with
	// failurePolicy Fail cannot be called (say chaos-controller-manager is
	// down), so every write of the copy is refused until it is back.
	ReasonWebhookUnavailable = "WebhookUnavailable"

	// ReasonCopyLeftBehind: a source moved away from a cluster whose
	// RemoteCluster no longer exists; its copy there could not be removed.
	ReasonCopyLeftBehind = "CopyLeftBehind"

	// ReasonRecreating: the old copy is deleted so that one with the new
	// spec can be created (update strategy Recreate, or Auto after the
	// remote refused the change).
	ReasonRecreating = "RecreatingCopy"

	// ReasonNamespaceMissing: the copy's namespace is missing remotely.
	ReasonNamespaceMissing = "NamespaceMissing"

	// ReasonForbidden: the remote kubeconfig may not write the copy.
	ReasonForbidden = "Forbidden"

	// ReasonKubeConfigMalformed: the content does not parse as a kubeconfig.
	ReasonKubeConfigMalformed = "KubeConfigMalformed"

	// ReasonKubeConfigIncomplete: no current context, cluster or server.
	ReasonKubeConfigIncomplete = "KubeConfigIncomplete"

	// ReasonKubeConfigExecNotAllowed: exec or auth-provider credentials while not allowed.
	ReasonKubeConfigExecNotAllowed = "KubeConfigExecNotAllowed"
)

// Transfer reasons: why a cluster changed owner, in the transfer event its
// new owner records and the clustershard_cluster_transfers_total metric.
const (
	// TransferRebalance: the ring moved the cluster (a replica joined or the
	// fleet changed).
	TransferRebalance = "Rebalance"
	// TransferDrain: its owner was cordoned (clustershard drain).
	TransferDrain = "Drain"
	// TransferShutdown: its owner shut down gracefully.
	TransferShutdown = "Shutdown"
	// TransferPin: spec.placement pinned it to another replica (clustershard
	// move), or its placement changed.
	TransferPin = "Placement"
	// TransferCrashTakeover: its owner's membership expired (a crash, a
	// freeze, a cut from the API server) and another replica took it.
	TransferCrashTakeover = "CrashTakeover"
	// TransferAbandoned: its owner could not stop its manager in time and
	// left the Lease to expire.
	TransferAbandoned = "Abandoned"
	// TransferFirstOwner: the cluster had no owner before (new, or its Lease
	// was deleted).
	TransferFirstOwner = "FirstOwner"

	// ReasonNoOwner is the reason of Ready=Unknown and Owned=False when the
	// last owner handed the cluster over with no successor (the last replica
	// shut down, or every replica is cordoned): no replica reconciles it.
	ReasonNoOwner = "NoOwner"

	// ReasonCredentialsRotated is the reason of the Normal event when new
	// kubeconfig credentials were applied to a running remote manager
	// without restarting it.
	ReasonCredentialsRotated = "CredentialsRotated"

	// ReasonOwnerChanged is the reason of the Normal event a new owner
	// records on a RemoteCluster: from whom, why and how long the cluster
	// went without a manager.
	ReasonOwnerChanged = "OwnerChanged"
)
