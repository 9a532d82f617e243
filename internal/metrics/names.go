package metrics

// Series names a replica exports that dashboards and alert rules may
// select. TestSeriesNamesMatchCollectors holds the clustershard ones against
// the collectors; the replica-process test holds all of them against a real
// scrape.
var (
	gauges = []string{
		"clustershard_ring_members", "clustershard_clusters", "clustershard_owned_clusters",
		"clustershard_unowned_clusters", "clustershard_fenced", "clustershard_remote_managers",
		"clustershard_replicated_objects", "clustershard_cluster_owned", "clustershard_remote_cluster_up",
		"clustershard_remote_unfenced_clusters", "clustershard_replica_cordoned", "clustershard_handover_window_clusters",
	}
	counters = []string{
		"clustershard_membership_renew_failures_total", "clustershard_membership_late_renewals_total",
		"clustershard_cluster_lease_transitions_total",
		"clustershard_ownership_writes_total", "clustershard_remote_probe_failures_total",
		"clustershard_replication_errors_total", "clustershard_helm_operations_total", "clustershard_remote_writes_in_doubt_total",
		"clustershard_cluster_events_dropped_total", "clustershard_cluster_transfers_total", "clustershard_kubeconfig_changes_total",
		"clustershard_handover_drains_total", "clustershard_handover_window_timeouts_total",
	}
	histograms = []string{
		"clustershard_handover_duration_seconds", "clustershard_cluster_unmanaged_duration_seconds",
		"clustershard_spawn_step_duration_seconds",
		"clustershard_remote_probe_duration_seconds", "clustershard_replication_sync_lag_seconds",
	}
	// controller-runtime's standard series, and Prometheus' own up.
	controllerRuntime = []string{
		"controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total",
		"controller_runtime_active_workers", "workqueue_depth", "workqueue_adds_total", "workqueue_retries_total", "up",
	}
	controllerRuntimeHistograms = []string{"controller_runtime_reconcile_time_seconds", "workqueue_queue_duration_seconds"}
)

// SeriesNames returns the names a PromQL selector may use against a
// replica's scrape: every gauge and counter, and each histogram's _bucket,
// _sum and _count.
func SeriesNames() map[string]bool {
	out := map[string]bool{}
	for _, list := range [][]string{gauges, counters, controllerRuntime} {
		for _, n := range list {
			out[n] = true
		}
	}
	for _, list := range [][]string{histograms, controllerRuntimeHistograms} {
		for _, h := range list {
			out[h+"_bucket"], out[h+"_sum"], out[h+"_count"] = true, true, true
		}
	}
	return out
}
