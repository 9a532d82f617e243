package dashboard

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// controllersRow is controller-runtime's view of clustershard's controllers
// and work queues. These metric names are shared by every controller-runtime
// operator, so each selector keeps to clustershard's scrape job.
func controllersRow() row {
	return row{title: "Controllers", panels: []cog.Builder[dashboard.Panel]{
		timeSeriesPanel("Reconciles", "Reconciles per second by controller and result (success, error, requeue, requeue_after).", units.OpsPerSecond, 8,
			target{expr: `sum by (controller, result) (rate(controller_runtime_reconcile_total{job="clustershard-metrics"}[5m]))`, legend: "{{controller}} {{result}}"}),
		timeSeriesPanel("Reconcile errors", "Reconciles returning an error per second, by controller.", units.OpsPerSecond, 8,
			target{expr: `sum by (controller) (rate(controller_runtime_reconcile_errors_total{job="clustershard-metrics"}[5m]))`, legend: "{{controller}}"}),
		timeSeriesPanel("Reconcile latency p99", "99th percentile of the reconcile duration, by controller.", units.Seconds, 8,
			target{expr: `histogram_quantile(0.99, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{job="clustershard-metrics"}[5m])))`, legend: "{{controller}}"}),
		timeSeriesPanel("Workqueue depth", "Items waiting in each work queue, summed over replicas.", units.Short, 8,
			target{expr: `sum by (name) (workqueue_depth{job="clustershard-metrics"})`, legend: "{{name}}"}),
		timeSeriesPanel("Workqueue wait p99", "99th percentile of the time an item waits in a work queue before being processed, by queue.", units.Seconds, 8,
			target{expr: `histogram_quantile(0.99, sum by (name, le) (rate(workqueue_queue_duration_seconds_bucket{job="clustershard-metrics"}[5m])))`, legend: "{{name}}"}),
		timeSeriesPanel("Workqueue retries", "Items re-queued with rate limiting per second, by queue.", units.OpsPerSecond, 8,
			target{expr: `sum by (name) (rate(workqueue_retries_total{job="clustershard-metrics"}[5m]))`, legend: "{{name}}"}),
	}}
}
