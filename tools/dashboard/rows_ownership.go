package dashboard

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// Every replica reports its own view of fleet-wide gauges (clusters,
// unowned clusters, ring members): the dashboard takes the max over
// replicas. Per-replica gauges (owned clusters, fenced) are summed.

// fleetOverviewRow is the fleet at a glance: one stat per number.
func fleetOverviewRow() row {
	return row{title: "Fleet overview", panels: []cog.Builder[dashboard.Panel]{
		statPanel("Clusters", "RemoteClusters in the management cluster (the highest count any replica sees).", 3,
			target{expr: `max(clustershard_clusters)`}),
		statPanel("Owned", "Clusters with an owning replica: the sum of every replica's owned clusters. Equals Clusters when the whole fleet is owned.", 3,
			target{expr: `sum(clustershard_owned_clusters)`}),
		statPanel("Unowned", "Clusters no replica may run a manager for (Lease free, or its holder's membership not renewed within the renew deadline). Non-zero for about a lease duration after a replica crashes.", 3,
			target{expr: `max(clustershard_unowned_clusters)`}).
			Thresholds(steps("green", 1, "red")).
			ColorMode(common.BigValueColorModeBackground),
		statPanel("Ring members", "Replicas on the ring (live, neither leaving nor cordoned).", 3,
			target{expr: `max(clustershard_ring_members)`}),
		statPanel("Replicas up", "Replica pods Prometheus scrapes successfully (job clustershard-metrics).", 3,
			target{expr: `sum(up{job="clustershard-metrics"})`}).
			Thresholds(steps("red", 1, "green")).
			ColorMode(common.BigValueColorModeValue),
		statPanel("Replicas fenced", "Replicas whose membership is not valid: they write nothing. 1 for a few seconds while a replica starts.", 3,
			target{expr: `sum(clustershard_fenced)`}).
			Thresholds(steps("green", 1, "red")).
			ColorMode(common.BigValueColorModeBackground),
		statPanel("Remote managers", "Remote managers of all replicas in the Running, Unhealthy and Failed states.", 6,
			target{expr: `sum(clustershard_remote_managers{state="Running"})`, legend: "Running"},
			target{expr: `sum(clustershard_remote_managers{state="Unhealthy"})`, legend: "Unhealthy"},
			target{expr: `sum(clustershard_remote_managers{state="Failed"})`, legend: "Failed"}).
			TextMode(common.BigValueTextModeValueAndName).
			Thresholds(steps("green", 1, "red")).
			ColorMode(common.BigValueColorModeValue).
			OverrideByName("Running", []dashboard.DynamicConfigValue{{
				Id:    "color",
				Value: dashboard.FieldColor{Mode: dashboard.FieldColorModeIdFixed, FixedColor: new("green")},
			}}),
	}}
}

// ownershipRow is how the fleet is spread over the replicas over time.
func ownershipRow() row {
	return row{title: "Ownership", panels: []cog.Builder[dashboard.Panel]{
		timeSeriesPanel("Owned clusters per replica", "Clusters whose Lease each replica holds in its current membership epoch.", units.Short, 8,
			target{expr: `sum by (pod) (clustershard_owned_clusters)`, legend: "{{pod}}"}),
		timeSeriesPanel("Lease transitions", "Cluster Lease transitions per second by event: acquired, expired (taken over from a holder whose membership expired, also counted as acquired), released, abandoned, lost.", units.OpsPerSecond, 8,
			target{expr: `sum by (event) (rate(clustershard_cluster_lease_transitions_total[5m]))`, legend: "{{event}}"}),
		timeSeriesPanel("Ring members per replica", "Replicas in the ring as each replica sees it; replicas disagree only briefly while one joins or leaves.", units.Short, 8,
			target{expr: `max by (pod) (clustershard_ring_members)`, legend: "{{pod}}"}),
	}}
}

// handOverRow is how fast clusters move between replicas.
func handOverRow() row {
	return row{title: "Hand-over", panels: []cog.Builder[dashboard.Panel]{
		timeSeriesPanel("Hand-over latency", "From the ring assigning a cluster to a replica to its remote manager running there. About 1 s for a graceful hand-over; about a lease duration after a crash.", units.Seconds, 8,
			target{expr: `histogram_quantile(0.5, sum by (le) (rate(clustershard_handover_duration_seconds_bucket[5m])))`, legend: "p50"},
			target{expr: `histogram_quantile(0.9, sum by (le) (rate(clustershard_handover_duration_seconds_bucket[5m])))`, legend: "p90"},
			target{expr: `histogram_quantile(0.99, sum by (le) (rate(clustershard_handover_duration_seconds_bucket[5m])))`, legend: "p99"}),
		timeSeriesPanel("Time without manager", "How long a cluster had no running remote manager, observed when one starts.", units.Seconds, 8,
			target{expr: `histogram_quantile(0.5, sum by (le) (rate(clustershard_cluster_unmanaged_duration_seconds_bucket[5m])))`, legend: "p50"},
			target{expr: `histogram_quantile(0.99, sum by (le) (rate(clustershard_cluster_unmanaged_duration_seconds_bucket[5m])))`, legend: "p99"}),
		timeSeriesPanel("Hand-overs per minute", "Clusters whose remote manager started on each replica after the ring assigned them there, per minute.", units.OpsPerMinute, 8,
			target{expr: `sum by (pod) (rate(clustershard_handover_duration_seconds_count[5m])) * 60`, legend: "{{pod}}"}),
		timeSeriesPanel("Transfers by reason", "Changes of owner per minute, counted by the new owner, by why: Rebalance, Drain, Shutdown, Placement, CrashTakeover, Abandoned, FirstOwner. Each is also an OwnerChanged event on its RemoteCluster.", units.OpsPerMinute, 16,
			target{expr: `sum by (reason) (rate(clustershard_cluster_transfers_total[5m])) * 60`, legend: "{{reason}}"}),
		timeSeriesPanel("Hand-overs that waited for work under way", "Planned hand-overs that let an install, copy or status write on its way finish before fencing the cluster, per minute, by outcome: finished within --stop-timeout, or cut (the successor then recovers what it left; a HelmRecovered event says so).", units.OpsPerMinute, 8,
			target{expr: `sum by (outcome) (rate(clustershard_handover_drains_total[5m])) * 60`, legend: "{{outcome}}"}),
		timeSeriesPanel("Hand-over window", "Clusters each replica let go of whose new manager it has not yet seen running on the successor (at most --handover-window per successor), and places freed by --handover-window-timeout instead of the successor's mark, per minute.", units.Short, 8,
			target{expr: `max by (pod) (clustershard_handover_window_clusters)`, legend: "{{pod}} in the window"},
			target{expr: `sum by (pod) (rate(clustershard_handover_window_timeouts_total[5m])) * 60`, legend: "{{pod}} timeouts/min"}),
		timeSeriesPanel("Cordoned replicas", "Replicas kept out of the ring by clustershard drain or cordon: alive, owning nothing.", units.Short, 8,
			target{expr: `sum(clustershard_replica_cordoned)`, legend: "cordoned"}),
	}}
}

// unownedAndFencedRow is where ownership is at risk: unowned clusters,
// fenced replicas and failing membership renewals.
func unownedAndFencedRow() row {
	return row{title: "Unowned and fenced", panels: []cog.Builder[dashboard.Panel]{
		timeSeriesPanel("Unowned clusters", "Clusters no replica may run a manager for, the highest count any replica reports.", units.Short, 8,
			target{expr: `max(clustershard_unowned_clusters)`, legend: "unowned"}),
		timeSeriesPanel("Fenced replicas", "1 while a replica's membership is not valid and it writes to no remote cluster.", units.Short, 8,
			target{expr: `max by (pod) (clustershard_fenced)`, legend: "{{pod}}"}),
		timeSeriesPanel("Membership renew failures and late answers", "Failed membership Lease renewals per second (a replica failing them for the renew deadline fences itself), and renewals answered after validity ended: kept within the grace, or voided past it (every cluster of the replica stopped and taken again).", units.OpsPerSecond, 8,
			target{expr: `sum by (pod) (rate(clustershard_membership_renew_failures_total[5m]))`, legend: "{{pod}} failed"},
			target{expr: `sum by (pod, outcome) (rate(clustershard_membership_late_renewals_total[5m]))`, legend: "{{pod}} late, {{outcome}}"}),
	}}
}
