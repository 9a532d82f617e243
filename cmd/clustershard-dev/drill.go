package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/clustershard/clustershard/tools/drill"
)

// drillCommand is `clustershard-dev drill`: chaos drills against replica
// processes of this binary on a local control plane.
func drillCommand() *cobra.Command {
	var o drill.Options
	var report string
	cmd := &cobra.Command{
		Use:   "drill",
		Short: "Run chaos drills (kill, term, pause, partition, ...) against local replica processes and check the ownership invariants",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := replicaBinary(o.Binary)
			if err != nil {
				return err
			}
			o.Binary = bin
			o.Out = cmd.OutOrStdout()
			// The report is the output; replicas log to files. client-go's
			// own complaints about the connections a fault cuts are noise.
			ctrl.SetLogger(logr.Discard())
			klog.SetLogger(logr.Discard())
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDrill(ctx, o, report)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&o.Replicas, "replicas", 3, "Replica processes.")
	fs.IntVar(&o.Remotes, "remotes", 2, "Remote API servers.")
	fs.IntVar(&o.ClustersPerRemote, "clusters-per-remote", 5, "RemoteClusters per remote API server.")
	fs.IntVar(&o.ObjectsPerCluster, "objects-per-cluster", 4, "Replicated objects per RemoteCluster.")
	fs.DurationVar(&o.LeaseDuration, "lease-duration", 4*time.Second, "Membership lease duration of the replicas.")
	fs.DurationVar(&o.RenewDeadline, "renew-deadline", 0, "Membership renew deadline of the replicas (0: half the lease duration).")
	fs.DurationVar(&o.RetryPeriod, "retry-period", 0, "Membership retry period of the replicas (0: an eighth of the lease duration).")
	fs.DurationVar(&o.Converge, "converge-timeout", 60*time.Second, "Bound of convergence (I3) after a fault.")
	fs.StringSliceVar(&o.Scenarios, "scenarios", drill.Scenarios, "Scenarios to run, in order.")
	fs.BoolVar(&o.Churn, "churn", false, "Create, update and delete sources continuously during each fault.")
	fs.BoolVar(&o.Helm, "helm", true, "Every cluster installs a small agent chart through spec.install.helm: Helm's remote writes are checked (I1), and each release must stay at revision 1 (I3).")
	fs.DurationVar(&o.HelmHookDelay, "helm-hook-delay", 2*time.Second, "With --helm, each remote's admission holds the agent chart's post-install hook this long, so every install is on its way for seconds while replicas start, join and leave (0: installs as fast as the API server).")
	fs.StringVar(&o.Dir, "keep-dir", "", "Keep replica logs, ownership journals and audit logs in this directory, which must be new or empty (journals are appended to).")
	fs.StringVar(&report, "report", "", "Write the report as JSON to this file.")
	fs.StringVar(&o.Binary, "replica-binary", "", "The clustershard binary the replicas run (default: clustershard next to this binary; an older build checks that a scenario catches its bug).")
	return cmd
}

func runDrill(ctx context.Context, o drill.Options, path string) error {
	rep, err := drill.Run(ctx, o)
	if rep != nil && path != "" {
		err = errors.Join(err, rep.WriteJSON(path))
	}
	if err != nil {
		return err
	}
	for _, l := range rep.Leftovers {
		fmt.Fprintf(o.Out, "I4 VIOLATED: process left after the drill: %s\n", l)
	}
	for _, l := range rep.Leaks {
		fmt.Fprintf(o.Out, "I4 VIOLATED: %s\n", l)
	}
	if !rep.Passed() {
		return errors.New("drill failed: an invariant was violated")
	}
	return nil
}
