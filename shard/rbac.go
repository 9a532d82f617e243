package shard

// The coordinator's Leases live in the controller's namespace only: a Role,
// generated into deploy/rbac by `make manifests`.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=clustershard-system
