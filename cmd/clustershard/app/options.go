package app

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/shard"
)

// ExampleKind is the example replicated kind used by the demo and the tests.
const ExampleKind = "ExampleChaos.v1alpha1.example.clustershard.io/examplechaos"

// options are the flags shared by the subcommands.
type options struct {
	kubeconfig string
	namespace  string
	kinds      []string

	replicaID       string
	incarnation     string
	leaseDuration   time.Duration
	renewDeadline   time.Duration
	retryPeriod     time.Duration
	shutdownTimeout time.Duration
	stopTimeout     time.Duration
	cleanupTimeout  time.Duration
	catchUpTimeout  time.Duration
	movesPerSecond  float64
	ringVNodes      int
	ringLoadFactor  float64
	clientQPS       float32
	clientBurst     int
	kubeQPS         float32
	kubeBurst       int
	remoteTimeout   time.Duration
	chartDir        string
	chartTimeout    time.Duration
	allowExec       bool
	probeInterval   time.Duration
	probeTimeout    time.Duration
	probeFailures   int
	perCluster      bool
	journal         string
	metricsAddr     string
	probeAddr       string
	zap             zap.Options
	parsedKinds     []remotecopy.Kind
}

func defaultNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "clustershard-system"
}

// addCommon registers the flags every subcommand needs.
func (o *options) addCommon(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Kubeconfig of the management cluster (default: in-cluster, then $KUBECONFIG, then ~/.kube/config).")
	fs.StringVar(&o.namespace, "namespace", defaultNamespace(), "Namespace of the Leases (default $POD_NAMESPACE or clustershard-system).")
	fs.Float32Var(&o.kubeQPS, "kube-api-qps", 50, "QPS of the management cluster's client (Leases, RemoteClusters, sources).")
	fs.IntVar(&o.kubeBurst, "kube-api-burst", 100, "Burst of the management cluster's client.")
	fs.StringSliceVar(&o.kinds, "replicate-kind", nil, "Replicated kind as Kind.version.group[/plural][:field.path][@Apply|Recreate|Auto], e.g. "+ExampleKind+"; repeatable. After @, how copies take spec changes (default Auto: apply, re-create when a remote webhook refuses the change). Its CRD must exist in the management cluster, and the RBAC rules for it must be granted.")
}

// addRun registers the flags of `run`.
func (o *options) addRun(fs *pflag.FlagSet) {
	fs.StringVar(&o.replicaID, "replica-id", os.Getenv("POD_NAME"), "This replica's identity (default $POD_NAME).")
	fs.StringVar(&o.incarnation, "incarnation", os.Getenv("POD_UID"), "What tells this process apart from any other started with the same --replica-id (default $POD_UID; random when empty). Leases are held by replica-id@incarnation: a second process with the same --replica-id waits until the first is gone.")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 15*time.Second, "Membership Lease duration.")
	fs.DurationVar(&o.renewDeadline, "renew-deadline", 10*time.Second, "Membership renew deadline; ownership is fenced past it.")
	fs.DurationVar(&o.retryPeriod, "retry-period", 2*time.Second, "Membership renew period.")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "Bound of the hand-over on SIGTERM; keep it below terminationGracePeriodSeconds.")
	fs.DurationVar(&o.stopTimeout, "stop-timeout", 10*time.Second, "Bound of one remote manager's stop on hand-over.")
	fs.DurationVar(&o.cleanupTimeout, "cleanup-timeout", 5*time.Minute, "How long a deleted RemoteCluster with cleanupPolicy Delete retries its remote cleanup before it is let go without it (a CleanupAbandoned event names what was left).")
	fs.Float64Var(&o.movesPerSecond, "moves-per-second", 10, "Rate limit of hand-overs while rebalancing.")
	fs.DurationVar(&o.catchUpTimeout, "catch-up-timeout", 0, "How long a joining replica stays not ready until it holds every cluster the ring assigns to it, so a rollout waits for it (0: twice --lease-duration).")
	fs.IntVar(&o.ringVNodes, "ring-vnodes", 256, "Virtual nodes per replica on the ring.")
	fs.Float64Var(&o.ringLoadFactor, "ring-load-factor", 1.25, "Bounded-load factor (> 1), or 0 for plain consistent hashing.")
	fs.Float32Var(&o.clientQPS, "remote-qps", 20, "QPS of each remote cluster's client.")
	fs.IntVar(&o.clientBurst, "remote-burst", 40, "Burst of each remote cluster's client.")
	fs.DurationVar(&o.remoteTimeout, "remote-timeout", 30*time.Second, "Timeout of each remote request.")
	fs.StringVar(&o.chartDir, "chart-cache-dir", "", "Scratch folder of spec.install.helm chart fetches (repository indexes; OCI credentials file registry-config.json). Default: a folder under $TMPDIR.")
	fs.DurationVar(&o.chartTimeout, "chart-fetch-timeout", 2*time.Minute, "Bound of one chart download; fetches run in the background and never hold other clusters.")
	fs.BoolVar(&o.allowExec, "allow-exec-kubeconfig", false, "Allow exec and auth-provider credentials in remote kubeconfigs (they run commands inside the controller).")
	fs.DurationVar(&o.probeInterval, "probe-interval", 10*time.Second, "How often each remote API server is probed.")
	fs.DurationVar(&o.probeTimeout, "probe-timeout", 5*time.Second, "Timeout of one probe.")
	fs.IntVar(&o.probeFailures, "probe-failures", 3, "Failed probes in a row before Connected=False.")
	fs.StringVar(&o.journal, "ownership-journal", "", "Append this replica's authority events (membership renewals, clusters owned, released, lost, managers running) as JSON lines to `file`, for the invariant checker of clustershard-dev drill.")
	fs.BoolVar(&o.perCluster, "per-cluster-metrics", true, "Export series labelled by cluster name (clustershard_cluster_owned, clustershard_remote_cluster_up, remote controllers' own series); turn off for very large fleets.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Metrics endpoint address; 0 disables it.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "healthz/readyz address; 0 disables it.")
	gfs := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.zap.BindFlags(gfs)
	fs.AddGoFlagSet(gfs)
}

// validateCommon checks the shared flags.
func (o *options) validateCommon() error {
	var errs []error
	if o.namespace == "" {
		errs = append(errs, errors.New("--namespace must not be empty"))
	}
	if o.kubeQPS <= 0 || o.kubeBurst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps %v and --kube-api-burst %d must be positive", o.kubeQPS, o.kubeBurst))
	}
	o.parsedKinds = nil
	for _, k := range o.kinds {
		pk, err := remotecopy.ParseKind(k)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		o.parsedKinds = append(o.parsedKinds, pk)
	}
	return errors.Join(errs...)
}

// validateRun checks the flags of `run`.
func (o *options) validateRun() error {
	errs := []error{o.validateCommon()}
	if o.replicaID == "" {
		errs = append(errs, errors.New("--replica-id is required (or set $POD_NAME)"))
	}
	if len(o.replicaID) > 63 {
		errs = append(errs, fmt.Errorf("--replica-id %q is longer than 63 characters", o.replicaID))
	}
	if strings.Contains(o.replicaID, "@") {
		errs = append(errs, fmt.Errorf("--replica-id %q may not contain '@'", o.replicaID))
	}
	if err := shard.ValidateIncarnation(o.incarnation); err != nil {
		errs = append(errs, fmt.Errorf("--incarnation: %w", err))
	}
	if err := shard.ValidateTiming(o.leaseDuration, o.renewDeadline, o.retryPeriod); err != nil {
		errs = append(errs, fmt.Errorf("--lease-duration %v, --renew-deadline %v, --retry-period %v: %w", o.leaseDuration, o.renewDeadline, o.retryPeriod, err))
	}
	if o.ringLoadFactor != 0 && o.ringLoadFactor <= 1 {
		errs = append(errs, fmt.Errorf("--ring-load-factor %v must be 0 or greater than 1", o.ringLoadFactor))
	}
	if o.ringVNodes <= 0 || o.movesPerSecond <= 0 || o.clientQPS <= 0 || o.clientBurst <= 0 || o.probeFailures <= 0 {
		errs = append(errs, errors.New("--ring-vnodes, --moves-per-second, --remote-qps, --remote-burst and --probe-failures must be positive"))
	}
	if o.probeInterval <= 0 || o.probeTimeout <= 0 || o.stopTimeout <= 0 || o.cleanupTimeout <= 0 || o.shutdownTimeout <= 0 || o.remoteTimeout <= 0 || o.chartTimeout <= 0 {
		errs = append(errs, errors.New("durations must be positive"))
	}
	if o.catchUpTimeout < 0 {
		errs = append(errs, fmt.Errorf("--catch-up-timeout %v must not be negative", o.catchUpTimeout))
	}
	return errors.Join(errs...)
}
