package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// ClusterSource reports, at scrape time, the clusters one replica owns and
// the health of their remote managers.
type ClusterSource interface {
	// Owned returns the clusters this replica owns.
	Owned() []string
	// ManagerUp reports whether the cluster's remote manager runs and its
	// API server answers probes (false when absent).
	ManagerUp(cluster string) bool
}

// ClusterSeries is the collector of the per-cluster series, labelled by
// cluster name. It is registered only when per-cluster metrics are enabled
// (the default); very large fleets turn it off.
var ClusterSeries = &clusterCollector{
	owned: prometheus.NewDesc("clustershard_cluster_owned",
		"1 for each cluster this replica owns (per-cluster series, off with --per-cluster-metrics=false).",
		[]string{"cluster"}, nil),
	up: prometheus.NewDesc("clustershard_remote_cluster_up",
		"1 when the remote manager of an owned cluster runs and its API server answers probes, else 0 (per-cluster series, off with --per-cluster-metrics=false).",
		[]string{"cluster"}, nil),
	sources: map[ClusterSource]struct{}{},
}

type clusterCollector struct {
	owned, up *prometheus.Desc
	mu        sync.Mutex
	sources   map[ClusterSource]struct{}
}

// Add makes s report through the collector until Remove.
func (c *clusterCollector) Add(s ClusterSource) {
	c.mu.Lock()
	c.sources[s] = struct{}{}
	c.mu.Unlock()
}

// Remove stops s reporting.
func (c *clusterCollector) Remove(s ClusterSource) {
	c.mu.Lock()
	delete(c.sources, s)
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.owned
	ch <- c.up
}

// Collect implements prometheus.Collector.
func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sources := make([]ClusterSource, 0, len(c.sources))
	for s := range c.sources {
		sources = append(sources, s)
	}
	c.mu.Unlock()
	seen := map[string]bool{}
	for _, s := range sources {
		for _, n := range s.Owned() {
			if seen[n] {
				continue // several replicas in one test process
			}
			seen[n] = true
			up := 0.0
			if s.ManagerUp(n) {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(c.owned, prometheus.GaugeValue, 1, n)
			ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, n)
		}
	}
}
