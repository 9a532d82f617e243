package remotecluster

// RBAC of the management side, generated into deploy/rbac by `make manifests`.
// Secrets are read-only, and only in the controller's own namespace: a Role,
// not a ClusterRole rule. Other namespaces allowed by
// --kubeconfig-secret-namespaces get their own Role (the Helm chart's
// kubeconfigSecretNamespaces, or by hand). CRDs are only read (they are
// copied into remote clusters with the remote cluster's own credentials).
//
// +kubebuilder:rbac:groups=clustershard.io,resources=remoteclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=clustershard.io,resources=remoteclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=clustershard.io,resources=remoteclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch,namespace=clustershard-system
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
