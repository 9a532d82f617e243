package fleet

import (
	"embed"
	"io/fs"
	"os"
	"path/filepath"
)

// AgentRelease is the Helm release name of the agent chart in each cluster.
const AgentRelease = "fleet-agent"

//go:embed agentchart
var agentChart embed.FS

// WriteAgentChart writes the agent chart (one ConfigMap) into dir and
// returns its path, for spec.install.helm of the fleet's clusters.
func WriteAgentChart(dir string) (string, error) {
	root := filepath.Join(dir, "agentchart")
	err := fs.WalkDir(agentChart, "agentchart", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(path))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := agentChart.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	return root, err
}
