// Package app holds the clustershard command: flags, validation and the
// wiring of its subcommands; main only calls Main.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/clustershard/clustershard/cmd/clustershard/status"
	"github.com/clustershard/clustershard/internal/helmrelease"
	"github.com/clustershard/clustershard/internal/remote"
	"github.com/clustershard/clustershard/internal/scheme"
	"github.com/clustershard/clustershard/replica"
	"github.com/clustershard/clustershard/shard"
)

// Main runs the command with args and returns the exit code.
func Main(args []string) int {
	cmd := newRoot()
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "clustershard:", err)
		return 1
	}
	return 0
}

func newRoot() *cobra.Command {
	o := &options{}
	run := &cobra.Command{
		Use:   "run",
		Short: "Run one replica: shard coordinator, registry of remote managers, controllers",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	o.addCommon(run.Flags())
	o.addRun(run.Flags())

	so := &options{}
	var output string
	var confirm time.Duration
	st := &cobra.Command{
		Use:   "status",
		Short: "Print which replica owns which RemoteCluster",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return so.status(cmd.Context(), output, confirm) },
	}
	st.Flags().DurationVar(&confirm, "confirm", 3*time.Second, "When replicas, Leases and status disagree, look again after this long and report only what still disagrees (0: report every disagreement seen once).")
	so.addCommon(st.Flags())
	st.Flags().StringVarP(&output, "output", "o", "table", "Output format: table, json or yaml.")

	root := &cobra.Command{
		Use:           "clustershard",
		Short:         "Manage a fleet of remote clusters from one management cluster, sharded across replicas",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		// `clustershard` alone is `clustershard run`.
		RunE: run.RunE,
	}
	o.addCommon(root.Flags())
	o.addRun(root.Flags())
	root.AddCommand(run, st)
	root.AddCommand(operateCommands()...)
	return root
}

// signalContext is cancelled on SIGINT or SIGTERM.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

func (o *options) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("management cluster kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = o.kubeQPS, o.kubeBurst
	return cfg, nil
}

func (o *options) run(ctx context.Context) error {
	if err := o.validateRun(); err != nil {
		return err
	}
	if o.incarnation == "" {
		o.incarnation = shard.NewIncarnation()
	}
	log := zap.New(zap.UseFlagOptions(&o.zap)).WithValues("replica", o.replicaID, "incarnation", o.incarnation)
	ctrl.SetLogger(log)
	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	ctx, cancel := signalContext(ctx)
	defer cancel()
	leaks := leakCheck() // after the signal handler's own goroutines exist
	journal, closeJournal, err := openJournal(o.journal)
	if err != nil {
		return err
	}
	defer closeJournal()
	rp, err := replica.New(ctx, cfg, replica.Options{
		Identity: o.replicaID, Incarnation: o.incarnation, Namespace: o.namespace, Scheme: scheme.New(), Kinds: o.parsedKinds,
		SecretNamespaces: o.secretNamespaces,
		KubeConfig:       remote.Options{AllowExec: o.allowExec, QPS: o.clientQPS, Burst: o.clientBurst, Timeout: o.remoteTimeout},
		Shard: shard.Options{
			LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline, RetryPeriod: o.retryPeriod,
			StopTimeout: o.stopTimeout, MovesPerSecond: o.movesPerSecond, CatchUpTimeout: o.catchUpTimeout,
			ExpectedReplicas: o.expectedReplicas, SettleWindow: o.settleWindow, SettleTimeout: o.settleTimeout,
			HandoverWindow: handoverWindow(o.handoverWindow), HandoverWindowTimeout: o.handoverWindowWait,
			Ring:    shard.RingOptions{LoadFactor: o.ringLoadFactor},
			Journal: journal,
		},
		ProbeInterval: o.probeInterval, ProbeTimeout: o.probeTimeout, ProbeFailureThreshold: o.probeFailures,
		MetricsBindAddress: o.metricsAddr, HealthProbeBindAddress: o.probeAddr, PprofBindAddress: o.pprofAddr, PerClusterMetrics: o.perCluster,
		ShutdownTimeout: o.shutdownTimeout, CleanupTimeout: o.cleanupTimeout, Logger: log,
		RemoteStartTimeout: o.remoteStartTimeout, InstallTimeout: o.installTimeout, HelmTimeout: o.helmTimeout,
		Resync: o.resync, UnownedGrace: o.unownedGrace, Recheck: o.recheck,
		RemoteClusterWorkers: o.rcWorkers, ReplicateWorkers: o.replWorkers,
		Charts: helmrelease.Options{Dir: o.chartDir, Timeout: o.chartTimeout},
	})
	if err != nil {
		return err
	}
	log.Info("Starting replica", "namespace", o.namespace, "kinds", o.kinds)
	if err := rp.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("Replica stopped")
	if journal != nil {
		// For the drill's I4: nothing this replica started may outlive it.
		leaked := leaks()
		if leaked != "" {
			log.Error(nil, "Goroutines still running after shutdown", "goroutines", leaked)
		}
		journal(shard.JournalEntry{Time: time.Now(), Replica: o.replicaID, Incarnation: o.incarnation, Event: shard.JournalExit, Detail: leaked})
	}
	return nil
}

func (o *options) status(ctx context.Context, output string, confirm time.Duration) error {
	if err := o.validateCommon(); err != nil {
		return err
	}
	if output != "table" && output != "json" && output != "yaml" {
		return fmt.Errorf("--output %q: want table, json or yaml", output)
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	rep, err := status.Collect(ctx, c, o.namespace, o.parsedKinds)
	if err != nil {
		return err
	}
	if len(rep.Warnings) > 0 && confirm > 0 {
		// Report only the disagreements that outlast a change in progress.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(confirm):
		}
		first := rep
		if rep, err = status.Collect(ctx, c, o.namespace, o.parsedKinds); err != nil {
			return err
		}
		rep.Confirm(first)
	}
	switch output {
	case "json":
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	case "yaml":
		b, err := yaml.Marshal(rep)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(b)
		return err
	}
	return rep.WriteTable(os.Stdout)
}
