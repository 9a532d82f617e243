package main_test

import (
	"maps"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/clustershard/clustershard/deploy"
	"github.com/clustershard/clustershard/test/promql"
	"github.com/clustershard/clustershard/tools/dashboard"
)

// checkMonitoringMetrics asserts that every metric named by a query of the
// dashboard or an expression of the alert rules is in the scrape output of
// the replicas (all of them together: per-cluster series are on the owner).
// Every expression must parse with the Prometheus parser.
func checkMonitoringMetrics(t *testing.T, addrs map[string]string) {
	t.Helper()
	exported := map[string]bool{"up": true} // written by Prometheus per target
	for _, addr := range addrs {
		maps.Copy(exported, seriesNames(scrape(t, addr)))
	}
	exprs := map[string]string{}
	queries, err := dashboard.Queries()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queries {
		exprs["dashboard "+q.Row+" / "+q.Panel+" / "+q.RefID] = q.Expr
	}
	alerts, err := deploy.AlertExpressions()
	if err != nil {
		t.Fatal(err)
	}
	for name, expr := range alerts {
		exprs["alert "+name] = expr
	}
	checked := map[string]bool{}
	for where, expr := range exprs {
		names, err := promql.MetricNames(expr)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		for _, n := range names {
			checked[n] = true
			if !exported[n] {
				t.Errorf("%s uses %s, which no replica exports", where, n)
			}
		}
	}
	t.Logf("%d expressions (%d dashboard queries, %d alerts) use %d metric names, all exported", len(exprs), len(queries), len(alerts), len(checked))
}

// checkTakeOverMetrics asserts what a SIGKILL take-over shows in the
// survivor's metrics, against its scrape before the kill: one take-over of
// an expired Lease per moved cluster, as many hand-over and
// time-without-manager observations (the latter at least the lease duration
// each, as a crash leaves the cluster unmanaged until the Lease expires),
// the dead replica's clusters seen as unowned on the way and none after.
func checkTakeOverMetrics(t *testing.T, addr string, before map[string]*dto.MetricFamily, moved, clusters int, maxUnowned float64) {
	t.Helper()
	const (
		handover  = "clustershard_handover_duration_seconds"
		unmanaged = "clustershard_cluster_unmanaged_duration_seconds"
	)
	var after map[string]*dto.MetricFamily
	delta := func(name string, labels map[string]string) float64 {
		return value(after, name, labels) - value(before, name, labels)
	}
	poll(t, 10*time.Second, "hand-over observations on the survivor", func() bool {
		after = scrape(t, addr)
		return delta(handover, nil) >= float64(moved) && delta(unmanaged, nil) >= float64(moved) &&
			value(after, "clustershard_owned_clusters", nil) == float64(clusters)
	})
	transitions := "clustershard_cluster_lease_transitions_total"
	if d := delta(transitions, map[string]string{"event": "expired"}); d != float64(moved) {
		t.Errorf("expired Leases taken over: %v, want %d", d, moved)
	}
	if d := delta(transitions, map[string]string{"event": "acquired"}); d != float64(moved) {
		t.Errorf("Leases acquired: %v, want %d (one per moved cluster, none twice)", d, moved)
	}
	if d := delta(transitions, map[string]string{"event": "lost"}); d != 0 {
		t.Errorf("clusters lost by the survivor during the take-over: %v", d)
	}
	mean := (histogramSum(after, unmanaged) - histogramSum(before, unmanaged)) / delta(unmanaged, nil)
	if mean < leaseDuration.Seconds() {
		t.Errorf("mean time without manager after a crash: %.2fs, want ≥ the lease duration %v", mean, leaseDuration)
	}
	if maxUnowned < 1 {
		t.Errorf("the dead replica's clusters never showed as unowned (max %v)", maxUnowned)
	}
	if u := value(after, "clustershard_unowned_clusters", nil); u != 0 {
		t.Errorf("unowned clusters after the take-over: %v", u)
	}
	t.Logf("take-over metrics: %v hand-overs, %v times without manager (mean %.2fs), max unowned %v", delta(handover, nil), delta(unmanaged, nil), mean, maxUnowned)
}

// scrape reads the /metrics of a replica process.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics of %s: %v", addr, err)
	}
	return fams
}

// seriesNames returns the names a PromQL selector can use for the families:
// a histogram's _bucket, _sum and _count, a summary's _sum and _count.
func seriesNames(fams map[string]*dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for name, f := range fams {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			out[name], out[name+"_sum"], out[name+"_count"] = true, true, true
		default:
			out[name] = true
		}
	}
	return out
}

// value returns the value of the series of family name whose labels include
// labels (counter, gauge or untyped), summed over matching series; for a
// histogram, its sample count.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f, ok := fams[name]
	if !ok {
		return 0
	}
	total := 0.0
	for _, m := range f.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			total += m.GetUntyped().GetValue()
		}
	}
	return total
}

// histogramSum returns the sum of observations of a histogram family.
func histogramSum(fams map[string]*dto.MetricFamily, name string) float64 {
	total := 0.0
	for _, m := range fams[name].GetMetric() {
		total += m.GetHistogram().GetSampleSum()
	}
	return total
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(want)
}
