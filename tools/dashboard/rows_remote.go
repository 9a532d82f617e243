package dashboard

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// remoteHealthRow is the health of the remote clusters: a table with one row
// per cluster and its owner, then the remote managers and their probes.
func remoteHealthRow() row {
	return row{title: "Remote health", panels: []cog.Builder[dashboard.Panel]{
		remoteClustersTable(),
		timeSeriesPanel("Remote managers by state", "Remote managers of all replicas by state: Starting, Running, Unhealthy, Failed, Stopping.", units.Short, 8,
			target{expr: `sum by (state) (clustershard_remote_managers)`, legend: "{{state}}"}),
		timeSeriesPanel("Probe latency p99", "99th percentile of the periodic /version probes of the remote API servers, per replica.", units.Seconds, 8,
			target{expr: `histogram_quantile(0.99, sum by (pod, le) (rate(clustershard_remote_probe_duration_seconds_bucket[5m])))`, legend: "{{pod}}"}),
		timeSeriesPanel("Probe failures", "Failed /version probes of remote API servers per second, per replica.", units.OpsPerSecond, 8,
			target{expr: `sum by (pod) (rate(clustershard_remote_probe_failures_total[5m]))`, legend: "{{pod}}"}),
		timeSeriesPanel("Helm operations", "Helm operations on spec.install.helm releases per second, by operation (install, upgrade, uninstall, recover, check) and result. Failures show as Installed=False on the RemoteCluster, with Helm's message.", units.OpsPerSecond, 24,
			target{expr: `sum by (operation, result) (rate(clustershard_helm_operations_total[5m]))`, legend: "{{operation}} {{result}}"}),
	}}
}

// remoteClustersTable lists every owned cluster with its owner pod and
// whether its remote API server answers. The per-cluster series it reads
// are off with --per-cluster-metrics=false: the table is then empty.
func remoteClustersTable() *table.PanelBuilder {
	up := "Remote API up"
	return tablePanel("Remote clusters", "One row per owned cluster: the replica owning it and whether its remote manager runs and its API server answers probes. Empty when per-cluster metrics are off (--per-cluster-metrics=false).", 24,
		target{expr: `max by (cluster, pod) (clustershard_remote_cluster_up)`},
		target{expr: `max by (cluster, pod) (clustershard_cluster_owned)`}).
		// Join the two queries on (cluster, pod), drop the constant owned
		// value and the timestamp, and name the columns.
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]bool{"Time": true, "Value #B": true},
			"indexByName":   map[string]int{"cluster": 0, "pod": 1, "Value #A": 2},
			"renameByName":  map[string]string{"cluster": "Cluster", "pod": "Owner", "Value #A": up},
		}}).
		SortBy([]cog.Builder[common.TableSortByFieldState]{common.NewTableSortByFieldStateBuilder().DisplayName("Cluster")}).
		OverrideByName(up, []dashboard.DynamicConfigValue{
			{Id: "mappings", Value: []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{
				Type: dashboard.MappingTypeValueToText,
				Options: map[string]dashboard.ValueMappingResult{
					"0": {Text: new("down"), Color: new("red")},
					"1": {Text: new("up"), Color: new("green")},
				},
			}}}},
			{Id: "custom.cellOptions", Value: common.TableCellOptions{
				TableColoredBackgroundCellOptions: common.NewTableColoredBackgroundCellOptions(),
			}},
		})
}

// replicationRow is the replication of source objects to remote clusters.
func replicationRow() row {
	return row{title: "Replication", panels: []cog.Builder[dashboard.Panel]{
		timeSeriesPanel("Replicated objects", "Source objects naming a remote cluster, by kind and replication state.", units.Short, 8,
			target{expr: `sum by (kind, state) (clustershard_replicated_objects)`, legend: "{{kind}} {{state}}"}),
		timeSeriesPanel("Sync lag", "From a replica first seeing a generation of a source object to its copy being applied in the remote cluster, by kind.", units.Seconds, 8,
			target{expr: `histogram_quantile(0.5, sum by (kind, le) (rate(clustershard_replication_sync_lag_seconds_bucket[5m])))`, legend: "{{kind}} p50"},
			target{expr: `histogram_quantile(0.99, sum by (kind, le) (rate(clustershard_replication_sync_lag_seconds_bucket[5m])))`, legend: "{{kind}} p99"}),
		timeSeriesPanel("Replication errors", "Failed replication attempts per second, by kind and reason (ClusterNotReady, ClusterNotFound, SyncFailed, APIError).", units.OpsPerSecond, 8,
			target{expr: `sum by (kind, reason) (rate(clustershard_replication_errors_total[5m]))`, legend: "{{kind}} {{reason}}"}),
	}}
}

// apiWritesRow is the load the ownership protocol puts on the API server.
func apiWritesRow() row {
	return row{title: "API writes", panels: []cog.Builder[dashboard.Panel]{
		timeSeriesPanel("Ownership API writes", "API writes (attempts) of the ownership protocol per second, by Lease kind (membership or cluster) and verb.", units.OpsPerSecond, 24,
			target{expr: `sum by (resource, verb) (rate(clustershard_ownership_writes_total[5m]))`, legend: "{{resource}} {{verb}}"}),
	}}
}
