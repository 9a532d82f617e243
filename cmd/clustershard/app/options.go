package app

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/replica"
	"github.com/clustershard/clustershard/shard"
)

// ExampleKind is the example replicated kind used by the demo and the tests.
const ExampleKind = "ExampleChaos.v1alpha1.example.clustershard.io/examplechaos"

// options are the flags shared by the subcommands.
type options struct {
	kubeconfig string
	namespace  string
	kinds      []string

	replicaID          string
	incarnation        string
	leaseDuration      time.Duration
	renewDeadline      time.Duration
	retryPeriod        time.Duration
	shutdownTimeout    time.Duration
	stopTimeout        time.Duration
	cleanupTimeout     time.Duration
	catchUpTimeout     time.Duration
	expectedReplicas   int
	settleWindow       time.Duration
	settleTimeout      time.Duration
	movesPerSecond     float64
	handoverWindow     int
	handoverWindowWait time.Duration
	ringVNodes         int
	ringLoadFactor     float64
	clientQPS          float32
	clientBurst        int
	kubeQPS            float32
	kubeBurst          int
	remoteTimeout      time.Duration
	remoteStartTimeout time.Duration
	installTimeout     time.Duration
	helmTimeout        time.Duration
	resync             time.Duration
	unownedGrace       time.Duration
	recheck            time.Duration
	rcWorkers          int
	replWorkers        int
	chartDir           string
	chartTimeout       time.Duration
	allowExec          bool
	secretNamespaces   []string
	probeInterval      time.Duration
	probeTimeout       time.Duration
	probeFailures      int
	perCluster         bool
	journal            string
	metricsAddr        string
	probeAddr          string
	pprofAddr          string
	zap                zap.Options
	parsedKinds        []remotecopy.Kind
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
	fs.Float32Var(&o.kubeQPS, "kube-api-qps", replica.DefaultKubeAPIQPS, "QPS of the management cluster's client (Leases, RemoteClusters, sources).")
	fs.IntVar(&o.kubeBurst, "kube-api-burst", replica.DefaultKubeAPIBurst, "Burst of the management cluster's client.")
	fs.StringSliceVar(&o.kinds, "replicate-kind", nil, "Replicated kind as Kind.version.group[/plural][:field.path][@Apply|Recreate|Auto], e.g. "+ExampleKind+"; repeatable. After @, how copies take spec changes (default Auto: apply, re-create when a remote webhook refuses the change). Its CRD must exist in the management cluster, and the RBAC rules for it must be granted.")
}

// addRun registers the flags of `run`; their defaults are the replica's.
func (o *options) addRun(fs *pflag.FlagSet) {
	d := replica.DefaultOptions()
	fs.StringVar(&o.replicaID, "replica-id", os.Getenv("POD_NAME"), "This replica's identity (default $POD_NAME).")
	fs.StringVar(&o.incarnation, "incarnation", os.Getenv("POD_UID"), "What tells this process apart from any other started with the same --replica-id (default $POD_UID; random when empty). Leases are held by replica-id@incarnation: a second process with the same --replica-id waits until the first is gone.")
	fs.DurationVar(&o.leaseDuration, "lease-duration", d.Shard.LeaseDuration, "Membership Lease duration.")
	fs.DurationVar(&o.renewDeadline, "renew-deadline", d.Shard.RenewDeadline, "Membership renew deadline; ownership is fenced past it.")
	fs.DurationVar(&o.retryPeriod, "retry-period", d.Shard.RetryPeriod, "Membership renew period.")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "Bound of the hand-over on SIGTERM; keep it below terminationGracePeriodSeconds.")
	fs.DurationVar(&o.stopTimeout, "stop-timeout", d.Shard.StopTimeout, "Bound of one remote manager's stop (its controllers' graceful shutdown included) on hand-over and on the replica's exit.")
	fs.DurationVar(&o.cleanupTimeout, "cleanup-timeout", d.CleanupTimeout, "How long a deleted RemoteCluster with cleanupPolicy Delete retries its remote cleanup before it is let go without it (a CleanupAbandoned event names what was left).")
	fs.Float64Var(&o.movesPerSecond, "moves-per-second", d.Shard.MovesPerSecond, "Rate limit of hand-overs while rebalancing.")
	fs.IntVar(&o.handoverWindow, "handover-window", shard.DefaultHandoverWindow, "Planned hand-overs (rebalancing, drain, shutdown) let go of at most this many clusters per successor whose new manager is not running yet; the others keep running here until their turn (0: no window, everything at once).")
	fs.DurationVar(&o.handoverWindowWait, "handover-window-timeout", 0, "How long a cluster let go of holds its place in the hand-over window without its successor marking the manager running (0: half of --stop-timeout).")
	fs.DurationVar(&o.catchUpTimeout, "catch-up-timeout", 0, "How long a joining replica stays not ready until it holds every cluster the ring assigns to it, so a rollout waits for it (0: twice --lease-duration).")
	fs.IntVar(&o.expectedReplicas, "expected-replicas", 0, "How many replicas the fleet is meant to have (the StatefulSet's replicas; 0: unknown). At a cold start (no live replica holds a cluster) a replica takes clusters once that many are on the ring, or once the ring stayed unchanged for --settle-window, or after --settle-timeout, so replicas starting together do not take clusters only to hand them over a second later.")
	fs.DurationVar(&o.settleWindow, "settle-window", 0, "At a cold start, how long the ring's members must stay unchanged before a replica takes clusters (0: three --retry-period).")
	fs.DurationVar(&o.settleTimeout, "settle-timeout", 0, "At a cold start, the longest a replica waits for the ring to settle before it takes clusters (0: --lease-duration).")
	fs.IntVar(&o.ringVNodes, "ring-vnodes", 256, "Ignored: the ring is rendezvous hashing, which has no virtual nodes.")
	_ = fs.MarkDeprecated("ring-vnodes", "the ring is rendezvous hashing and has no virtual nodes; the flag is ignored")
	fs.Float64Var(&o.ringLoadFactor, "ring-load-factor", 0, "Loosens the ring's load bound: 0 gives each replica at most ceil(M/R)+1 of M clusters over R replicas; a factor F > 1 allows up to ceil(F*M/R), moving fewer clusters when replicas come and go.")
	fs.Float32Var(&o.clientQPS, "remote-qps", d.KubeConfig.QPS, "QPS of each remote cluster's client.")
	fs.IntVar(&o.clientBurst, "remote-burst", d.KubeConfig.Burst, "Burst of each remote cluster's client.")
	fs.DurationVar(&o.remoteTimeout, "remote-timeout", d.KubeConfig.Timeout, "Timeout of each remote request.")
	fs.DurationVar(&o.remoteStartTimeout, "remote-start-timeout", d.RemoteStartTimeout, "Bound of a remote manager's start (its caches synced, its modules started); past it the spawn fails and is retried.")
	fs.DurationVar(&o.installTimeout, "install-timeout", d.InstallTimeout, "Bound of each wait of spec.install: copied CRDs established, the remote fence's policy enforced.")
	fs.DurationVar(&o.helmTimeout, "helm-timeout", d.HelmTimeout, "Bound of one Helm install, upgrade or uninstall of spec.install.helm, hooks included.")
	fs.DurationVar(&o.resync, "resync-period", d.Resync, "How often each owned RemoteCluster is reconciled again (its Helm release checked, its conditions refreshed).")
	fs.DurationVar(&o.unownedGrace, "unowned-grace", 0, "How long a source's cluster may have no running owner before the source says so (0: twice --lease-duration, so a crash take-over is not reported).")
	fs.DurationVar(&o.recheck, "recheck-interval", d.Recheck, "How often a source whose RemoteCluster is missing or has no running owner is looked at again (events wake it sooner).")
	fs.IntVar(&o.rcWorkers, "remotecluster-workers", d.RemoteClusterWorkers, "How many RemoteClusters reconcile (probe, epoch, install, spawn) at once; a hand-over of many clusters spawns this many at a time.")
	fs.IntVar(&o.replWorkers, "replicate-workers", d.ReplicateWorkers, "How many sources of each replicated kind reconcile at once.")
	fs.StringVar(&o.chartDir, "chart-cache-dir", "", "Scratch folder of spec.install.helm chart fetches (repository indexes; OCI credentials file registry-config.json). Default: a folder under $TMPDIR.")
	fs.DurationVar(&o.chartTimeout, "chart-fetch-timeout", d.Charts.Timeout, "Bound of one chart download; fetches run in the background and never hold other clusters.")
	fs.StringSliceVar(&o.secretNamespaces, "kubeconfig-secret-namespaces", nil, "Namespaces kubeconfig Secrets may live in, comma-separated or repeated (default: --namespace). A RemoteCluster naming a Secret elsewhere gets Connected=False SecretNamespaceNotAllowed and nothing is read; the replicas cache and may read (RBAC: a Role in each) Secrets of these namespaces only.")
	fs.BoolVar(&o.allowExec, "allow-exec-kubeconfig", false, "Allow exec and auth-provider credentials in remote kubeconfigs (they run commands inside the controller).")
	fs.DurationVar(&o.probeInterval, "probe-interval", d.ProbeInterval, "How often each remote API server is probed.")
	fs.DurationVar(&o.probeTimeout, "probe-timeout", d.ProbeTimeout, "Timeout of one probe.")
	fs.IntVar(&o.probeFailures, "probe-failures", d.ProbeFailureThreshold, "Failed probes in a row before Connected=False.")
	fs.StringVar(&o.journal, "ownership-journal", "", "Append this replica's authority events (membership renewals, clusters owned, released, lost, managers running) as JSON lines to `file`, for the invariant checker of clustershard-dev drill.")
	fs.BoolVar(&o.perCluster, "per-cluster-metrics", true, "Export series labelled by cluster name (clustershard_cluster_owned, clustershard_remote_cluster_up, remote controllers' own series); turn off for very large fleets.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Metrics endpoint address; 0 disables it.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "healthz/readyz address; 0 disables it.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "Address serving Go's CPU, heap and goroutine profiles (/debug/pprof/), e.g. 127.0.0.1:6060; 0 disables it. Bind it to loopback: profiles show what the process holds.")
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
	for _, ns := range o.secretNamespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--kubeconfig-secret-namespaces: %q is not a namespace name: %s", ns, strings.Join(msgs, "; ")))
		}
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
	if o.movesPerSecond <= 0 || o.clientQPS <= 0 || o.clientBurst <= 0 || o.probeFailures <= 0 || o.rcWorkers <= 0 || o.replWorkers <= 0 {
		errs = append(errs, errors.New("--moves-per-second, --remote-qps, --remote-burst, --probe-failures, --remotecluster-workers and --replicate-workers must be positive"))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"--probe-interval", o.probeInterval}, {"--probe-timeout", o.probeTimeout}, {"--stop-timeout", o.stopTimeout},
		{"--cleanup-timeout", o.cleanupTimeout}, {"--shutdown-timeout", o.shutdownTimeout}, {"--remote-timeout", o.remoteTimeout},
		{"--chart-fetch-timeout", o.chartTimeout}, {"--remote-start-timeout", o.remoteStartTimeout}, {"--install-timeout", o.installTimeout},
		{"--helm-timeout", o.helmTimeout}, {"--resync-period", o.resync}, {"--recheck-interval", o.recheck},
	} {
		if f.d <= 0 {
			errs = append(errs, fmt.Errorf("%s %v must be positive", f.name, f.d))
		}
	}
	if o.unownedGrace < 0 {
		errs = append(errs, fmt.Errorf("--unowned-grace %v must not be negative", o.unownedGrace))
	}
	if o.catchUpTimeout < 0 || o.settleWindow < 0 || o.settleTimeout < 0 {
		errs = append(errs, fmt.Errorf("--catch-up-timeout %v, --settle-window %v and --settle-timeout %v must not be negative", o.catchUpTimeout, o.settleWindow, o.settleTimeout))
	}
	if o.handoverWindow < 0 || o.handoverWindowWait < 0 {
		errs = append(errs, fmt.Errorf("--handover-window %d and --handover-window-timeout %v must not be negative", o.handoverWindow, o.handoverWindowWait))
	}
	if o.expectedReplicas < 0 {
		errs = append(errs, fmt.Errorf("--expected-replicas %d must not be negative", o.expectedReplicas))
	}
	return errors.Join(errs...)
}

// handoverWindow maps --handover-window to shard.Options.HandoverWindow,
// where 0 is the default and a negative value no window.
func handoverWindow(flag int) int {
	if flag == 0 {
		return -1
	}
	return flag
}
