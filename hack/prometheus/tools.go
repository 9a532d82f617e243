//go:build tools

// Package tools pins promtool and the Prometheus server that `make promtool`
// and `make prometheus` build into bin/ for the monitoring tests and the
// Prometheus drill of `make e2e`. It is a module of its own, apart from
// hack/tools: Prometheus would otherwise raise about sixty modules of the
// kube-apiserver build (gRPC, OpenTelemetry, x/net), changing the control
// plane the tests run against. Its Prometheus version is the main module's
// (`make verify` checks it).
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
