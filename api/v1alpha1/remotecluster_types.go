package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Condition types kept on RemoteCluster.status.conditions.
const (
	// ConditionReady is True when the remote manager of the cluster runs on its owner.
	ConditionReady = "Ready"
	// ConditionConnected is True when the remote API server answered the last probe.
	ConditionConnected = "Connected"
	// ConditionInstalled is True when everything spec.install asks for is present remotely.
	ConditionInstalled = "Installed"
	// ConditionOwned is True when a live replica holds the cluster's Lease.
	ConditionOwned = "Owned"
	// ConditionRemoteFenced is True when the remote API server itself
	// refuses writes of earlier owners (the ownership epoch policy); False
	// says why it cannot, and the cluster is fenced by its owner only.
	ConditionRemoteFenced = "RemoteFenced"
)

// CleanupPolicy says what happens to installed remote objects when a RemoteCluster is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type CleanupPolicy string

const (
	// CleanupRetain leaves everything installed in the remote cluster.
	CleanupRetain CleanupPolicy = "Retain"
	// CleanupDelete removes what clustershard installed in the remote cluster.
	CleanupDelete CleanupPolicy = "Delete"
)

// SecretKeyReference names one key of a Secret in the management cluster.
type SecretKeyReference struct {
	// Namespace of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`

	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key of the Secret's data that holds the kubeconfig.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// KubeConfigSource says where the kubeconfig of a remote cluster comes from.
type KubeConfigSource struct {
	// SecretRef names the Secret key holding the kubeconfig, as in Chaos Mesh.
	SecretRef SecretKeyReference `json:"secretRef"`
}

// HelmInstall is a Helm release to install or upgrade in the remote cluster
// before its manager is spawned (Chaos Mesh's chart release, generalised).
type HelmInstall struct {
	// Chart says where the chart comes from:
	//   - a local path inside the controller's file system (a chart folder or
	//     a .tgz archive, for example from a mounted volume), read at each
	//     install or upgrade;
	//   - oci://host/path/name: a chart in an OCI registry, tag = version;
	//   - https://host/path/name-1.2.3.tgz: a chart archive;
	//   - https://host/path/name: chart "name" of the Helm repository at
	//     https://host/path (its index.yaml), version = a version or a
	//     semver constraint (empty: the newest).
	// Charts fetched over the network are cached per version.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Chart string `json:"chart"`

	// Version of the chart; empty takes the chart as found (a local chart) or
	// the newest (a repository). A release is upgraded only when the chart
	// version or the values change.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Version string `json:"version,omitempty"`

	// ReleaseName of the Helm release.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=53
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ReleaseName string `json:"releaseName"`

	// Namespace of the release in the remote cluster, created when missing.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`

	// Values given to the chart (Chaos Mesh's configOverride).
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	Values *runtime.RawExtension `json:"values,omitempty"`
}

// InstallSpec is what to ensure in the remote cluster before its manager is spawned.
type InstallSpec struct {
	// CRDs copies the CustomResourceDefinitions of the replicated kinds from the
	// management cluster into the remote cluster.
	// +kubebuilder:default=true
	// +optional
	CRDs *bool `json:"crds,omitempty"`

	// Namespace to create in the remote cluster.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$`
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Helm release to install or upgrade in the remote cluster.
	// +optional
	Helm *HelmInstall `json:"helm,omitempty"`

	// CleanupPolicy says whether what was installed is removed when the
	// RemoteCluster is deleted. With Delete, the Helm release is also
	// uninstalled when spec.install.helm is removed or names another release.
	// +kubebuilder:default=Retain
	// +optional
	CleanupPolicy CleanupPolicy `json:"cleanupPolicy,omitempty"`
}

// RemoteClusterSpec is the desired state of a RemoteCluster.
type RemoteClusterSpec struct {
	// KubeConfig says how to reach the remote cluster.
	KubeConfig KubeConfigSource `json:"kubeConfig"`

	// Install is what to ensure in the remote cluster before its manager runs.
	// +optional
	Install *InstallSpec `json:"install,omitempty"`

	// Namespaces restricts the remote manager's cache to these namespaces;
	// empty watches the whole cluster.
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`

	// Placement constrains which replica may own the cluster; empty lets the
	// ring place it.
	// +optional
	Placement *Placement `json:"placement,omitempty"`
}

// Placement constrains where the ring places a RemoteCluster. A pin names
// the replica to run on (clustershard move sets it); avoidReplicas names
// replicas not to run on. Status.placement says how the constraint was
// applied, and why when it could not be.
type Placement struct {
	// Replica pins the cluster to this replica (its --replica-id, the pod
	// name of a StatefulSet) while that replica is live and not cordoned;
	// otherwise the ring places it as if unpinned.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Replica string `json:"replica,omitempty"`

	// AvoidReplicas are replicas the cluster must not run on, unless every
	// replica on the ring is one of them.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	// +optional
	AvoidReplicas []string `json:"avoidReplicas,omitempty"`
}

// RemoteClusterStatus is the observed state of a RemoteCluster.
type RemoteClusterStatus struct {
	// Conditions: Ready, Connected, Installed, Owned and RemoteFenced.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Owner is the replica that holds the cluster's Lease, as that replica
	// last wrote it: the last owner's word, which a crashed owner cannot
	// correct (clustershard status judges ownership from the Leases).
	// +optional
	Owner string `json:"owner,omitempty"`

	// OwnerIncarnation is the owning process: replica@incarnation (the pod
	// UID), which tells a restarted replica from the one before.
	// +optional
	OwnerIncarnation string `json:"ownerIncarnation,omitempty"`

	// OwnershipEpoch is the ownership epoch the owner raised in the remote
	// cluster when it started its manager: every remote write carries it,
	// and the remote refuses writes of an older one.
	// +optional
	OwnershipEpoch int64 `json:"ownershipEpoch,omitempty"`

	// Placement explains how spec.placement was applied (pinned, avoiding,
	// or why it could not be); empty when the ring placed the cluster freely.
	// +optional
	Placement string `json:"placement,omitempty"`

	// ObservedGeneration is the generation last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// KubeConfigHash is a hash of the kubeconfig the running manager uses.
	// +optional
	KubeConfigHash string `json:"kubeConfigHash,omitempty"`

	// ServerVersion is the remote API server's version.
	// +optional
	ServerVersion string `json:"serverVersion,omitempty"`

	// LastHeartbeatTime is when the owner last wrote this status: on every
	// change, and at least every 5 minutes while nothing changes (the
	// Heartbeat column). An older one means no replica is reconciling the
	// cluster, whatever the other columns say.
	// +optional
	LastHeartbeatTime *metav1.Time `json:"lastHeartbeatTime,omitempty"`

	// LastHandoverTime is when the cluster last changed owner: when its
	// owner acquired the cluster's Lease (the Owned-Since column).
	// +optional
	LastHandoverTime *metav1.Time `json:"lastHandoverTime,omitempty"`

	// Helm is the Helm release deployed in the remote cluster for spec.install.helm.
	// +optional
	Helm *HelmReleaseStatus `json:"helm,omitempty"`
}

// HelmReleaseStatus is the observed state of the Helm release in the remote cluster.
type HelmReleaseStatus struct {
	// ReleaseName of the release.
	ReleaseName string `json:"releaseName"`
	// Namespace of the release.
	Namespace string `json:"namespace"`
	// Chart is the deployed chart's name.
	// +optional
	Chart string `json:"chart,omitempty"`
	// Version is the deployed chart's version.
	// +optional
	Version string `json:"version,omitempty"`
	// AppVersion is the deployed chart's appVersion.
	// +optional
	AppVersion string `json:"appVersion,omitempty"`
	// Revision is the release's revision in Helm's history.
	// +optional
	Revision int `json:"revision,omitempty"`
	// Status is Helm's status of that revision (deployed, failed, ...).
	// +optional
	Status string `json:"status,omitempty"`
	// ValuesHash is a hash of the values the revision was deployed with.
	// +optional
	ValuesHash string `json:"valuesHash,omitempty"`
	// LastDeployed is when the revision was deployed.
	// +optional
	LastDeployed *metav1.Time `json:"lastDeployed,omitempty"`
}

// RemoteCluster is a remote Kubernetes cluster managed from this management cluster.
// Exactly one clustershard replica owns it at a time.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=csrc,categories=clustershard
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.status.owner`
// +kubebuilder:printcolumn:name="Owned-Since",type=date,JSONPath=`.status.lastHandoverTime`
// +kubebuilder:printcolumn:name="Epoch",type=integer,JSONPath=`.status.ownershipEpoch`,priority=1
// +kubebuilder:printcolumn:name="Incarnation",type=string,JSONPath=`.status.ownerIncarnation`,priority=1
// +kubebuilder:printcolumn:name="Connected",type=string,JSONPath=`.status.conditions[?(@.type=="Connected")].status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Installed",type=string,JSONPath=`.status.conditions[?(@.type=="Installed")].status`,priority=1
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.helm.revision`,priority=1
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.lastHeartbeatTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="RemoteCluster name must be at most 63 characters: it is used as a label value in remote clusters"
type RemoteCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec RemoteClusterSpec `json:"spec"`
	// Status is the observed state.
	// +optional
	Status RemoteClusterStatus `json:"status,omitempty"`
}

// RemoteClusterList is a list of RemoteCluster.
//
// +kubebuilder:object:root=true
type RemoteClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the RemoteClusters.
	Items []RemoteCluster `json:"items"`
}
