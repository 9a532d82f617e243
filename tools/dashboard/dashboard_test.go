package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/test/promql"
)

// generatedDir is where hack/gen-dashboard writes the dashboard.
var generatedDir = filepath.Join("..", "..", "deploy", "monitoring", "grafana")

// wantRows are the dashboard's rows, top to bottom.
var wantRows = []string{
	"Fleet overview",
	"Ownership",
	"Hand-over",
	"Unowned and fenced",
	"Remote health",
	"Replication",
	"API writes",
	"Controllers",
}

// allowedMetrics returns the metric names the replicas export (the
// reference list of clustershard's metrics, controller-runtime's standard
// ones and Prometheus' up), with the series of each histogram.
func allowedMetrics() map[string]bool { return metrics.SeriesNames() }

func TestQueriesParseAndUseExportedMetrics(t *testing.T) {
	queries, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) == 0 {
		t.Fatal("no queries")
	}
	allowed := allowedMetrics()
	for _, q := range queries {
		names, err := promql.MetricNames(q.Expr)
		if err != nil {
			t.Errorf("%s / %s / %s: %v", q.Row, q.Panel, q.RefID, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s / %s / %s: %q selects no metric", q.Row, q.Panel, q.RefID, q.Expr)
		}
		for _, n := range names {
			if !allowed[n] {
				t.Errorf("%s / %s / %s: metric %q is not exported by the replicas", q.Row, q.Panel, q.RefID, n)
			}
		}
		// The only variable is the data source: a Grafana variable in an
		// expression would not be checked as written.
		if strings.Contains(q.Expr, "$") {
			t.Errorf("%s / %s / %s: %q uses a Grafana variable", q.Row, q.Panel, q.RefID, q.Expr)
		}
	}
}

func TestEveryRowAndPanel(t *testing.T) {
	queries, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	queried := map[string]bool{}
	for _, q := range queries {
		queried[q.Panel] = true
	}

	d := decode(t)
	var rowsSeen []string
	perRow := map[string]int{}
	ids := map[float64]bool{}
	titles := map[string]bool{}
	row := ""
	for _, p := range d["panels"].([]any) {
		panel := p.(map[string]any)
		id, _ := panel["id"].(float64)
		if id == 0 || ids[id] {
			t.Errorf("panel %v: id %v missing or not unique", panel["title"], panel["id"])
		}
		ids[id] = true
		title, _ := panel["title"].(string)
		if panel["type"] == "row" {
			row = title
			rowsSeen = append(rowsSeen, title)
			continue
		}
		perRow[row]++
		if title == "" || titles[title] {
			t.Errorf("row %q: panel title %q empty or not unique", row, title)
		}
		titles[title] = true
		if desc, _ := panel["description"].(string); desc == "" {
			t.Errorf("panel %q has no description", title)
		}
		checkDatasource(t, title, panel["datasource"])
		targets, _ := panel["targets"].([]any)
		if len(targets) == 0 || !queried[title] {
			t.Errorf("panel %q has no query", title)
		}
		for _, tg := range targets {
			checkDatasource(t, title+" query", tg.(map[string]any)["datasource"])
		}
		pos := panel["gridPos"].(map[string]any)
		if x, w := pos["x"].(float64), pos["w"].(float64); w <= 0 || x+w > 24 {
			t.Errorf("panel %q: gridPos %v outside the 24-column grid", title, pos)
		}
	}
	if !slices.Equal(rowsSeen, wantRows) {
		t.Errorf("rows = %q, want %q", rowsSeen, wantRows)
	}
	for _, r := range wantRows {
		if perRow[r] == 0 {
			t.Errorf("row %q has no panel", r)
		}
	}

	if d["uid"] != UID || d["title"] != Title || d["refresh"] != "30s" {
		t.Errorf("uid, title, refresh = %v, %v, %v", d["uid"], d["title"], d["refresh"])
	}
	if tm := d["time"].(map[string]any); tm["from"] != "now-1h" || tm["to"] != "now" {
		t.Errorf("time = %v", tm)
	}
	if tags := d["tags"].([]any); len(tags) != 1 || tags[0] != "clustershard" {
		t.Errorf("tags = %v", tags)
	}
	vars := d["templating"].(map[string]any)["list"].([]any)
	found := false
	for _, v := range vars {
		v := v.(map[string]any)
		if v["name"] == DatasourceVariable && v["type"] == "datasource" && v["query"] == "prometheus" {
			found = true
		}
	}
	if !found {
		t.Errorf("no Prometheus datasource variable %q in %v", DatasourceVariable, vars)
	}
}

func TestRemoteClustersTableIsInstant(t *testing.T) {
	queries, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range queries {
		if q.Panel != "Remote clusters" {
			if q.Instant {
				t.Errorf("%s / %s: instant query in a time series or stat panel", q.Panel, q.RefID)
			}
			continue
		}
		if !q.Instant {
			t.Errorf("Remote clusters / %s: not an instant query", q.RefID)
		}
		n, err := promql.MetricNames(q.Expr)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, n...)
	}
	slices.Sort(names)
	if want := []string{"clustershard_cluster_owned", "clustershard_remote_cluster_up"}; !slices.Equal(names, want) {
		t.Errorf("Remote clusters reads %v, want %v", names, want)
	}
}

func TestRoundTrip(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	data, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	var strict classicDashboard
	// The SDK returns its error list even when empty: only entries count.
	var buildErrs cog.BuildErrors
	if err := strict.UnmarshalJSONStrict(data); err != nil && (!errors.As(err, &buildErrs) || len(buildErrs) > 0) {
		t.Fatalf("the SDK's strict decoding rejects the dashboard: %v", err)
	}
	var d classicDashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var before, after any
	if err := json.Unmarshal(data, &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(again, &after); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("the dashboard changed through the SDK's Dashboard type:\n%s", again)
	}
}

func TestBuildIsStable(t *testing.T) {
	a, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("two builds differ")
	}
	if !bytes.HasSuffix(a, []byte("}\n")) {
		t.Error("no trailing newline")
	}
}

func TestGeneratedFilesAreUpToDate(t *testing.T) {
	const regenerate = "stale: run `make manifests` (or `go run ./hack/gen-dashboard`) and commit"
	want, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(generatedDir, ConfigMapKey))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: %s", ConfigMapKey, regenerate)
	}

	wantCM, err := ConfigMap()
	if err != nil {
		t.Fatal(err)
	}
	gotCM, err := os.ReadFile(filepath.Join(generatedDir, "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotCM, wantCM) {
		t.Errorf("configmap.yaml: %s", regenerate)
	}
	if !bytes.HasPrefix(gotCM, []byte("# ")) || !bytes.Contains(gotCM, []byte("make manifests")) {
		t.Error("configmap.yaml does not open with its generated-by comment")
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(gotCM, &cm); err != nil {
		t.Fatalf("configmap.yaml: %v", err)
	}
	if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" || cm.Name != ConfigMapName || cm.Namespace != ConfigMapNamespace {
		t.Errorf("configmap.yaml is %s %s %s/%s", cm.APIVersion, cm.Kind, cm.Namespace, cm.Name)
	}
	if cm.Labels[SidecarLabel] != "1" {
		t.Errorf("configmap.yaml labels %v lack %s: \"1\"", cm.Labels, SidecarLabel)
	}
	if len(cm.Data) != 1 || cm.Data[ConfigMapKey] != string(want) {
		t.Errorf("configmap.yaml data is not exactly %s = the dashboard JSON", ConfigMapKey)
	}
}

// decode returns Build's output as generic JSON.
func decode(t *testing.T) map[string]any {
	t.Helper()
	data, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// checkDatasource fails unless ds refers to the dashboard's datasource
// variable, of type prometheus.
func checkDatasource(t *testing.T, what string, ds any) {
	t.Helper()
	m, _ := ds.(map[string]any)
	if m["type"] != "prometheus" || m["uid"] != "${"+DatasourceVariable+"}" {
		t.Errorf("%s: datasource %v, want the %s variable", what, ds, DatasourceVariable)
	}
}
