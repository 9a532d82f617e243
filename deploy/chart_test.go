package deploy_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

const chartDir = "helm/clustershard"

// helm lint passes on the chart with its defaults, without a warning.
func TestHelmLint(t *testing.T) {
	res := action.NewLint().Run([]string{chartDir}, nil)
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		}
	}
	for _, err := range res.Errors {
		t.Errorf("helm lint: %v", err)
	}
}

// render is helm template: the chart rendered client-side with vals.
func render(t *testing.T, vals map[string]any) (string, error) {
	t.Helper()
	chart, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{})
	install.ClientOnly, install.DryRun, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = "shard", "shard-schema"
	rel, err := install.Run(chart, vals)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// values.schema.json refuses a misspelt key and a malformed value before
// anything renders, naming what is wrong; the defaults and a full custom set
// pass.
func TestHelmValuesSchemaRefusesTypos(t *testing.T) {
	if _, err := render(t, nil); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if _, err := render(t, map[string]any{
		"replicaCount": 5, "image": map[string]any{"tag": "v1", "pullPolicy": "Always"},
		"lease":          map[string]any{"duration": "20s", "renewDeadline": "12s", "retryPeriod": "1500ms"},
		"ring":           map[string]any{"loadFactor": "1.25"},
		"extraArgs":      []any{"--handover-window=4"},
		"replicateKinds": []any{"PodChaos.v1alpha1.chaos-mesh.org/podchaos"},
		"extraRules":     []any{map[string]any{"apiGroups": []any{"chaos-mesh.org"}, "resources": []any{"podchaos"}, "verbs": []any{"get", "list"}}},
	}); err != nil {
		t.Fatalf("custom values: %v", err)
	}
	for name, c := range map[string]struct {
		vals map[string]any
		want string
	}{
		"misspelt top-level key": {map[string]any{"replicaCont": 3}, "replicaCont"},
		"misspelt nested key":    {map[string]any{"lease": map[string]any{"durration": "15s"}}, "durration"},
		"duration without unit":  {map[string]any{"lease": map[string]any{"duration": "15"}}, "duration"},
		"port out of range":      {map[string]any{"metrics": map[string]any{"port": 70000}}, "port"},
		"replicas as a string":   {map[string]any{"replicaCount": "three"}, "replicaCount"},
		"flag without dashes":    {map[string]any{"extraArgs": []any{"handover-window=4"}}, "extraArgs"},
		"unknown pull policy":    {map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, "pullPolicy"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := render(t, c.vals)
			if err == nil {
				t.Fatalf("rendered with %v", c.vals)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error does not name %q: %v", c.want, err)
			}
		})
	}
}

// leaves flattens values into dotted keys; objects whose content is free
// (resources) stay one key.
func leaves(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if !ok || prefix == "resources" {
		out[prefix] = v
		return
	}
	for k, sub := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		leaves(key, sub, out)
	}
}

var valueRow = regexp.MustCompile("(?m)^\\| `([^`]+)` \\| ([^|]+) \\|")

// The chart's README documents every value of values.yaml, with its
// default, and no value that values.yaml does not have.
func TestChartReadmeMatchesValues(t *testing.T) {
	raw, err := os.ReadFile(chartDir + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal(raw, &vals); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{}
	leaves("", vals, want)
	readme, err := os.ReadFile(chartDir + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	for _, m := range valueRow.FindAllStringSubmatch(string(readme), -1) {
		documented[m[1]] = strings.TrimSpace(m[2])
	}
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		def, ok := documented[k]
		if !ok {
			t.Errorf("values.yaml has %s, which the chart's README does not document", k)
			continue
		}
		var shown string
		switch v := want[k].(type) {
		case map[string]any:
			continue // described in words
		case []any:
			if len(v) > 0 {
				t.Errorf("%s: a non-empty default list; document its items", k)
			}
			shown = "`[]`"
		default:
			shown = fmt.Sprintf("`%v`", v)
		}
		if def != shown {
			t.Errorf("%s: the README says the default is %s, values.yaml %s", k, def, shown)
		}
	}
	for k := range documented {
		if !slices.Contains(keys, k) {
			t.Errorf("the chart's README documents %s, which values.yaml does not have", k)
		}
	}
}
