//go:build tools

// Package tools pins the control-plane binaries built into bin/ by `make controlplane`.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
