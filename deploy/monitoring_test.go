package deploy_test

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/clustershard/clustershard/deploy"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/promql"
)

const (
	rulesFile          = "monitoring/prometheus/clustershard.rules.yaml"
	rulesTestFile      = "monitoring/prometheus/clustershard.rules_test.yaml"
	prometheusRuleFile = "monitoring/prometheusrule.yaml"
	serviceMonitorFile = "monitoring/servicemonitor.yaml"
	runbookURL         = "https://github.com/clustershard/clustershard/blob/main/docs/monitoring.md#alerts"
	metricsJob         = "clustershard-metrics"
)

// exportedMetrics are the metric names a replica's /metrics serves (the
// clustershard collectors and controller-runtime's), plus Prometheus' up.
var exportedMetrics = metrics.SeriesNames()

// ruleFile is a plain Prometheus rules file, decoded into the Prometheus
// Operator's types, whose field names are Prometheus' own.
type ruleFile struct {
	Groups []monitoringv1.RuleGroup `json:"groups"`
}

// promtoolTests is the part of a promtool unit test file the tests read.
type promtoolTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name        string `json:"name"`
		InputSeries []struct {
			Series string `json:"series"`
		} `json:"input_series"`
		AlertRuleTests []struct {
			EvalTime  string `json:"eval_time"`
			Alertname string `json:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `json:"exp_labels"`
				ExpAnnotations map[string]string `json:"exp_annotations"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(data, &rf); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	if len(rf.Groups) != 1 || rf.Groups[0].Name != "clustershard" || len(rf.Groups[0].Rules) == 0 {
		t.Fatalf("%s: want one group clustershard with rules, got %d groups", rulesFile, len(rf.Groups))
	}
	return rf
}

func alerts(t *testing.T) []monitoringv1.Rule {
	t.Helper()
	var out []monitoringv1.Rule
	for _, g := range readRules(t).Groups {
		out = append(out, g.Rules...)
	}
	return out
}

func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin, err := localcluster.FindTool("promtool")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

// The rules load in Prometheus and pass their unit tests.
func TestMonitoringRulesPromtool(t *testing.T) {
	promtool(t, "check", "rules", rulesFile)
	promtool(t, "test", "rules", rulesTestFile)
}

// Every expression parses and selects only metrics the replicas export, and
// so do the series of the unit tests.
func TestMonitoringRuleMetricNames(t *testing.T) {
	for _, r := range alerts(t) {
		names, err := promql.MetricNames(r.Expr.String())
		if err != nil {
			t.Errorf("%s: %v", r.Alert, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", r.Alert, r.Expr.String())
		}
		for _, n := range names {
			if !exportedMetrics[n] {
				t.Errorf("%s: metric %s is not exported by clustershard", r.Alert, n)
			}
		}
	}
	for _, tc := range readPromtoolTests(t).Tests {
		for _, s := range tc.InputSeries {
			names, err := promql.MetricNames(s.Series)
			if err != nil {
				t.Errorf("test %q: series %s: %v", tc.Name, s.Series, err)
				continue
			}
			for _, n := range names {
				if !exportedMetrics[n] {
					t.Errorf("test %q: metric %s is not exported by clustershard", tc.Name, n)
				}
			}
		}
	}
}

func readPromtoolTests(t *testing.T) promtoolTests {
	t.Helper()
	data, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var pt promtoolTests
	if err := yaml.Unmarshal(data, &pt); err != nil {
		t.Fatalf("%s: %v", rulesTestFile, err)
	}
	if !reflect.DeepEqual(pt.RuleFiles, []string{"clustershard.rules.yaml"}) {
		t.Fatalf("%s: rule_files = %v, want [clustershard.rules.yaml]", rulesTestFile, pt.RuleFiles)
	}
	return pt
}

// Every alert is documented (severity, summary, description, runbook with the
// usual checks, runbook_url) and has a firing and a not-firing unit test.
func TestMonitoringAlertsDocumentedAndTested(t *testing.T) {
	rules := alerts(t)
	byName := map[string]monitoringv1.Rule{}
	for _, r := range rules {
		if r.Alert == "" || !strings.HasPrefix(r.Alert, "Clustershard") {
			t.Errorf("rule %q: want an alert named Clustershard*", r.Alert+r.Record)
			continue
		}
		if _, dup := byName[r.Alert]; dup {
			t.Errorf("alert %s is defined twice", r.Alert)
		}
		byName[r.Alert] = r
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		if got := r.Annotations["runbook_url"]; got != runbookURL {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, runbookURL)
		}
		for _, check := range []string{"kubectl get remoteclusters.clustershard.io", "clustershard status", "kubectl -n clustershard-system get leases", "logs"} {
			if !strings.Contains(r.Annotations["runbook"], check) {
				t.Errorf("%s: the runbook does not say to check %q", r.Alert, check)
			}
		}
	}

	firing, quiet := map[string]int{}, map[string]int{}
	for _, tc := range readPromtoolTests(t).Tests {
		for _, at := range tc.AlertRuleTests {
			r, ok := byName[at.Alertname]
			if !ok {
				// A test of an unknown alert would pass as never firing.
				t.Errorf("test %q tests %q, which is no alert of %s", tc.Name, at.Alertname, rulesFile)
				continue
			}
			if len(at.ExpAlerts) == 0 {
				quiet[at.Alertname]++
				continue
			}
			firing[at.Alertname]++
			for _, exp := range at.ExpAlerts {
				if exp.ExpLabels["severity"] != r.Labels["severity"] || exp.ExpAnnotations["summary"] != r.Annotations["summary"] {
					t.Errorf("test %q at %s: %s expected with severity %q and summary %q, the rule has %q and %q", tc.Name, at.EvalTime,
						at.Alertname, exp.ExpLabels["severity"], exp.ExpAnnotations["summary"], r.Labels["severity"], r.Annotations["summary"])
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		if firing[name] == 0 {
			t.Errorf("%s has no unit test where it fires", name)
		}
		if quiet[name] == 0 {
			t.Errorf("%s has no unit test where it does not fire", name)
		}
	}
}

// The embedded rules give the same alerts and expressions as the file.
func TestMonitoringAlertExpressions(t *testing.T) {
	got, err := deploy.AlertExpressions()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, r := range alerts(t) {
		want[r.Alert] = r.Expr.String()
	}
	if !maps.Equal(got, want) {
		t.Fatalf("AlertExpressions() = %v\nwant %v", got, want)
	}
}

// The generated PrometheusRule is a valid Prometheus Operator object holding
// exactly the groups of the plain rules file.
func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	data, err := os.ReadFile(prometheusRuleFile)
	if err != nil {
		t.Fatal(err)
	}
	header := "# generated by make manifests from deploy/monitoring/prometheus/clustershard.rules.yaml; do not edit\n"
	if !bytes.HasPrefix(data, []byte(header)) {
		t.Errorf("%s does not start with %q", prometheusRuleFile, header)
	}
	var pr monitoringv1.PrometheusRule
	if err := yaml.UnmarshalStrict(data, &pr); err != nil {
		t.Fatalf("%s: %v", prometheusRuleFile, err)
	}
	if pr.APIVersion != monitoringv1.SchemeGroupVersion.String() || pr.Kind != monitoringv1.PrometheusRuleKind {
		t.Errorf("%s is a %s %s", prometheusRuleFile, pr.APIVersion, pr.Kind)
	}
	if pr.Name != "clustershard" || pr.Namespace != "clustershard-system" || pr.Labels["app.kubernetes.io/name"] != "clustershard" {
		t.Errorf("%s: metadata %s/%s labels %v", prometheusRuleFile, pr.Namespace, pr.Name, pr.Labels)
	}
	want := readRules(t).Groups
	if reflect.DeepEqual(pr.Spec.Groups, want) {
		return
	}
	t.Errorf("%s differs from %s: run make manifests", prometheusRuleFile, rulesFile)
	got := map[string]monitoringv1.Rule{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			got[g.Name+"/"+r.Alert+r.Record] = r
		}
	}
	for _, g := range want {
		for _, r := range g.Rules {
			if key := g.Name + "/" + r.Alert + r.Record; !reflect.DeepEqual(got[key], r) {
				t.Errorf("rule %s:\n got  %+v\n want %+v", key, got[key], r)
			}
		}
	}
}

// The ServiceMonitor scrapes the metrics Service of the kustomize base by its
// port name, every 30s, with the Service's name as job.
func TestServiceMonitorSelectsMetricsService(t *testing.T) {
	data, err := os.ReadFile(serviceMonitorFile)
	if err != nil {
		t.Fatal(err)
	}
	var sm monitoringv1.ServiceMonitor
	if err := yaml.UnmarshalStrict(data, &sm); err != nil {
		t.Fatalf("%s: %v", serviceMonitorFile, err)
	}
	if sm.APIVersion != monitoringv1.SchemeGroupVersion.String() || sm.Kind != monitoringv1.ServiceMonitorsKind {
		t.Errorf("%s is a %s %s", serviceMonitorFile, sm.APIVersion, sm.Kind)
	}
	if sm.Name != "clustershard" || sm.Namespace != "clustershard-system" {
		t.Errorf("%s: metadata %s/%s", serviceMonitorFile, sm.Namespace, sm.Name)
	}
	if sm.Spec.JobLabel != "" {
		t.Errorf("%s: jobLabel %q: the job must stay the Service's name %s", serviceMonitorFile, sm.Spec.JobLabel, metricsJob)
	}
	selector, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if selector.Empty() {
		t.Fatalf("%s selects every Service", serviceMonitorFile)
	}

	// The Services as deploy/default renders them (with the common labels).
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "default")
	if err != nil {
		t.Fatalf("kustomize build deploy/default: %v", err)
	}
	var selected []corev1.Service
	for _, r := range res.Resources() {
		if r.GetKind() != "Service" {
			continue
		}
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		var svc corev1.Service
		if err := yaml.UnmarshalStrict(y, &svc); err != nil {
			t.Fatal(err)
		}
		inNamespace := svc.Namespace == sm.Namespace || slices.Contains(sm.Spec.NamespaceSelector.MatchNames, svc.Namespace) || sm.Spec.NamespaceSelector.Any
		if inNamespace && selector.Matches(labels.Set(svc.Labels)) {
			selected = append(selected, svc)
		}
	}
	if len(selected) != 1 || selected[0].Name != metricsJob {
		names := []string{}
		for _, s := range selected {
			names = append(names, s.Name)
		}
		t.Fatalf("%s selects the Services %v of deploy/default, want only %s", serviceMonitorFile, names, metricsJob)
	}
	svc := selected[0]

	// Its own labels in services.yaml are part of the selector, so a change
	// there shows here.
	raw, err := os.ReadFile("default/services.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for doc := range bytes.SplitSeq(raw, []byte("\n---\n")) {
		var s corev1.Service
		if err := yaml.UnmarshalStrict(doc, &s); err != nil {
			t.Fatal(err)
		}
		if s.Name != metricsJob {
			continue
		}
		for k, v := range s.Labels {
			if sm.Spec.Selector.MatchLabels[k] != v {
				t.Errorf("%s: the selector lacks %s=%s of Service %s in default/services.yaml", serviceMonitorFile, k, v, metricsJob)
			}
		}
	}

	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%s: %d endpoints, want 1", serviceMonitorFile, len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port == "" || !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
		t.Errorf("%s: endpoint port %q is no port name of Service %s (%v)", serviceMonitorFile, ep.Port, metricsJob, svc.Spec.Ports)
	}
	if ep.Interval != "30s" {
		t.Errorf("%s: endpoint interval %q, want 30s", serviceMonitorFile, ep.Interval)
	}
}

// deploy/monitoring builds, with every object in clustershard-system.
func TestMonitoringKustomization(t *testing.T) {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "monitoring")
	if err != nil {
		t.Fatalf("kustomize build deploy/monitoring: %v", err)
	}
	kinds := map[string]int{}
	for _, r := range res.Resources() {
		kinds[r.GetKind()]++
		if r.GetNamespace() != "clustershard-system" {
			t.Errorf("%s %s is in namespace %q, want clustershard-system", r.GetKind(), r.GetName(), r.GetNamespace())
		}
	}
	for _, want := range []string{monitoringv1.ServiceMonitorsKind, monitoringv1.PrometheusRuleKind, "ConfigMap"} {
		if kinds[want] != 1 {
			t.Errorf("deploy/monitoring has %d %s, want 1 (has %v)", kinds[want], want, kinds)
		}
	}
}
