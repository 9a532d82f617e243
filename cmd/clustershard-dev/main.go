// Command clustershard-dev holds the development tools of clustershard,
// kept out of the replica binary (which carries no test harness): `demo`
// starts a local control plane and shows ownership moving, `drill` runs
// chaos drills against replica processes and checks the invariants. Both
// run the replicas from the clustershard binary, by default the one next
// to this binary (make builds both into bin/).
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/clustershard/clustershard/cmd/clustershard-dev/demo"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "clustershard-dev:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	var d demo.Options
	dm := &cobra.Command{
		Use:   "demo",
		Short: "Start a local control plane with remote clusters and replicas, and show ownership moving",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := replicaBinary(d.Binary)
			if err != nil {
				return err
			}
			d.Binary = bin
			return demo.Run(cmd.Context(), d)
		},
	}
	d.AddFlags(dm.Flags())
	dm.Flags().StringVar(&d.Binary, "replica-binary", "", "The clustershard binary the replicas run (default: clustershard next to this binary).")
	root := &cobra.Command{
		Use:           "clustershard-dev",
		Short:         "Development tools of clustershard: the local demo and the chaos drills",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
	}
	root.AddCommand(dm, drillCommand())
	return root
}

// replicaBinary is the clustershard binary the replicas run: flag when set,
// else clustershard in this binary's folder.
func replicaBinary(flag string) (string, error) {
	path := flag
	if path == "" {
		self, err := os.Executable()
		if err != nil {
			return "", err
		}
		path = filepath.Join(filepath.Dir(self), "clustershard")
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("replica binary %s not found: build it (go build -o %s ./cmd/clustershard) or pass --replica-binary", path, path)
	case err != nil:
		return "", fmt.Errorf("replica binary: %w", err)
	case st.IsDir() || st.Mode()&0o111 == 0:
		return "", fmt.Errorf("replica binary %s is not an executable file", path)
	}
	return filepath.Abs(path)
}
