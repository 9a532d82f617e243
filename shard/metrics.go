package shard

import (
	"github.com/prometheus/client_golang/prometheus"
)

// ownershipWrites counts every API write the ownership protocol makes:
// membership renewals and cluster Lease acquisitions and releases.
var ownershipWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "clustershard_ownership_writes_total",
	Help: "API writes made by the ownership protocol, by verb and by Lease kind (membership or cluster).",
}, []string{"verb", "resource"})

// Collectors returns the shard coordinator's metrics, for explicit
// registration into controller-runtime's metrics registry.
func Collectors() []prometheus.Collector { return []prometheus.Collector{ownershipWrites} }
