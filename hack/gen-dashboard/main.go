// Command gen-dashboard writes clustershard's Grafana dashboard, built as
// code by tools/dashboard, under deploy/monitoring/grafana: the dashboard
// JSON (clustershard.json, to import or provision) and a ConfigMap holding it
// for the Grafana sidecar (configmap.yaml). `make manifests` runs it from the
// repository root.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/clustershard/clustershard/tools/dashboard"
)

func main() {
	dir := flag.String("dir", filepath.Join("deploy", "monitoring", "grafana"), "directory to write clustershard.json and configmap.yaml into")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "gen-dashboard:", err)
		os.Exit(1)
	}
}

// run writes the dashboard JSON and its ConfigMap into dir.
func run(dir string) error {
	js, err := dashboard.Build()
	if err != nil {
		return err
	}
	cm, err := dashboard.ConfigMap()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		dashboard.ConfigMapKey: js,
		"configmap.yaml":       cm,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
