package replica

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/fx"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/controllers"
	"github.com/clustershard/clustershard/controllers/monitor"
	"github.com/clustershard/clustershard/controllers/remotecluster"
	"github.com/clustershard/clustershard/controllers/replicate"
	"github.com/clustershard/clustershard/internal/helmrelease"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/internal/remote"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/registry"
	"github.com/clustershard/clustershard/shard"
)

// Options configure a replica.
type Options struct {
	// Identity is the replica's name.
	Identity string
	// Incarnation tells this process apart from others started with the
	// same Identity (shard.Options.Incarnation); random when empty.
	Incarnation string
	// Namespace holds the Leases.
	Namespace string
	// SecretNamespaces are the namespaces kubeconfig Secrets may live in;
	// the manager caches Secrets of these only (default: Namespace).
	SecretNamespaces []string
	// Scheme must know the built-in kinds and the clustershard API.
	Scheme *runtime.Scheme
	// Kinds are the replicated kinds.
	Kinds []remotecopy.Kind
	// KubeConfig shapes remote rest.Configs (exec permission, QPS, timeout).
	KubeConfig remote.Options
	// Shard times the ownership protocol (Identity, Namespace and clients
	// are filled in).
	Shard shard.Options
	// ProbeInterval, ProbeTimeout and ProbeFailureThreshold configure remote health.
	ProbeInterval         time.Duration
	ProbeTimeout          time.Duration
	ProbeFailureThreshold int
	// MetricsBindAddress and HealthProbeBindAddress: "0" disables them.
	MetricsBindAddress     string
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's profiles (/debug/pprof/) there; "" or
	// "0" (the default) disables it. For profiling, never for a port others
	// reach: profiles show what the process holds.
	PprofBindAddress string
	// ShutdownTimeout bounds the hand-over on shutdown (default
	// DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// RemoteStartTimeout bounds the start of a remote manager's fx app
	// (default registry.DefaultStartTimeout).
	RemoteStartTimeout time.Duration
	// InstallTimeout and HelmTimeout bound spec.install's waits and its
	// Helm operations (defaults in package remotecluster).
	InstallTimeout time.Duration
	HelmTimeout    time.Duration
	// UnownedGrace is how long a source's cluster may have no running
	// owner before the source says so (default twice the lease duration);
	// Recheck how often such a source, or one naming no RemoteCluster, is
	// looked at again (default replicate.DefaultRecheck).
	UnownedGrace time.Duration
	Recheck      time.Duration
	// RemoteClusterWorkers is how many RemoteClusters reconcile (probe,
	// epoch, install, spawn) at once; ReplicateWorkers how many sources of
	// each kind (defaults in packages remotecluster and replicate).
	RemoteClusterWorkers int
	ReplicateWorkers     int
	// RemoteModules are extra remote modules (the monitor is always added).
	RemoteModules []fx.Option
	// Logger is the root logger.
	Logger logr.Logger
	// PerClusterMetrics exports the series labelled by cluster name
	// (clustershard_cluster_owned, clustershard_remote_cluster_up).
	PerClusterMetrics bool
	// Resync re-reconciles each owned RemoteCluster this often (default
	// remotecluster.DefaultResync); it is also the period of the Helm
	// release's check.
	Resync time.Duration
	// CleanupTimeout bounds the remote cleanup of a deleted RemoteCluster
	// (cleanupPolicy Delete); default remotecluster.DefaultCleanupTimeout.
	CleanupTimeout time.Duration
	// Charts configures the cache of spec.install.helm charts (its Log is
	// filled in).
	Charts helmrelease.Options
	// SeveralPerProcess lets tests run several replicas in one process by
	// skipping controller-runtime's process-wide controller-name check.
	SeveralPerProcess bool
}

// Replica is one assembled replica.
type Replica struct {
	// Manager is the management cluster's manager.
	Manager manager.Manager
	// Coordinator is the shard coordinator.
	Coordinator *shard.Coordinator
	// Registry holds the remote managers.
	Registry *registry.Registry

	opts     Options
	notifier *Notifier
	charts   *helmrelease.Charts
}

// New assembles a replica against the management cluster behind cfg.
func New(ctx context.Context, cfg *rest.Config, o Options) (*Replica, error) {
	o.defaults()
	grace := o.ShutdownTimeout + 10*time.Second
	if err := metrics.Register(ctrlmetrics.Registry); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                  o.Scheme,
		Logger:                  o.Logger,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsBindAddress},
		HealthProbeBindAddress:  o.HealthProbeBindAddress,
		PprofBindAddress:        o.PprofBindAddress,
		LeaderElection:          false,
		GracefulShutdownTimeout: &grace,
		Controller:              config.Controller{SkipNameValidation: &o.SeveralPerProcess},
		// Replicated kinds are unstructured: read them from the cache too
		// (controller-runtime reads unstructured objects from the API server
		// by default, where the cluster field index does not exist, so a
		// cluster event found none of its sources).
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{o.Namespace: {}}},
			// Only the Secrets kubeconfigs may come from: not every
			// Secret of the management cluster in memory, and none the
			// RBAC (a Role per namespace) does not grant.
			&corev1.Secret{}: {Namespaces: namespaceSet(o.SecretNamespaces)},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("management manager: %w", err)
	}
	direct, err := client.New(cfg, client.Options{Scheme: o.Scheme})
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := checkSecretAccess(ctx, kube, o.SecretNamespaces); err != nil {
		return nil, err
	}
	o.Kinds = learnShapes(ctx, direct, o.Kinds, o.Logger)
	rp := &Replica{Manager: mgr, opts: o, notifier: &Notifier{}}

	so := o.Shard
	if o.Incarnation == "" {
		o.Incarnation = shard.NewIncarnation()
	}
	so.Identity, so.Incarnation, so.Namespace, so.Client, so.Reader, so.Kube = o.Identity, o.Incarnation, o.Namespace, direct, mgr.GetClient(), kube
	so.Handler = rp.notifier
	so.Unowned, so.UnownedAfter = rp.notifier.Notify, o.UnownedGrace
	so.Logger = o.Logger.WithName("shard")
	// One list per pass serves both: the coordinator asks for the names,
	// then (on the same goroutine) for the placements of that list.
	var listed map[string]shard.Placement
	so.Clusters = func() ([]string, error) {
		var list v1alpha1.RemoteClusterList
		if err := mgr.GetClient().List(context.Background(), &list); err != nil {
			return nil, err
		}
		names := make([]string, 0, len(list.Items))
		for _, rc := range list.Items {
			names = append(names, rc.Name)
		}
		listed = placements(list.Items)
		return names, nil
	}
	so.Placements = func() (map[string]shard.Placement, error) { return listed, nil }
	// Set below, once the remotecluster controller exists (before Run).
	var noOwner func(ctx context.Context, cluster, why string) error
	so.Orphaned = func(ctx context.Context, cluster, why string) error {
		if noOwner == nil {
			return nil
		}
		return noOwner(ctx, cluster, why)
	}
	transfers := mgr.GetEventRecorder("clustershard-shard")
	so.Transferred = func(t shard.Transfer) { recordTransfer(mgr.GetClient(), transfers, t) }
	if rp.Coordinator, err = shard.New(so); err != nil {
		return nil, err
	}
	// Remote managers stop by hand-over (Stop) or Close after it, never
	// straight from the shutdown signal: a SIGTERM must not look like a
	// failed manager to the controllers while the hand-over runs.
	rp.Registry, err = registry.New(context.WithoutCancel(ctx), registry.Options{
		ManageClient:          mgr.GetClient(),
		ManageReader:          mgr.GetAPIReader(),
		Scheme:                o.Scheme,
		RemoteModules:         append([]fx.Option{monitor.Module(o.Kinds, o.Identity)}, o.RemoteModules...),
		Logger:                o.Logger.WithName("registry"),
		QPS:                   o.KubeConfig.QPS,
		Burst:                 o.KubeConfig.Burst,
		ProbeInterval:         o.ProbeInterval,
		ProbeTimeout:          o.ProbeTimeout,
		ProbeFailureThreshold: o.ProbeFailureThreshold,
		StartTimeout:          o.RemoteStartTimeout,
		StopGrace:             o.Shard.StopTimeout,
		Fence:                 rp.Coordinator,
		SharedControllerNames: !o.PerClusterMetrics,
		OnEvent:               rp.notifier.RegistryEvent,
	})
	if err != nil {
		return nil, err
	}
	rp.notifier.Registry = rp.Registry
	rp.notifier.OnRunning = rp.Coordinator.ManagerRunning
	if o.PerClusterMetrics {
		metrics.RegisterClusterSeries(ctrlmetrics.Registry)
		metrics.ClusterSeries.Add(rp)
	}

	co := o.Charts
	co.Log = o.Logger.WithName("charts")
	if rp.charts, err = helmrelease.NewCharts(co); err != nil {
		return nil, err
	}
	rec := &remotecluster.Reconciler{
		Client: mgr.GetClient(), Scheme: o.Scheme, Registry: rp.Registry, Ownership: rp.Coordinator,
		Identity: o.Identity, Holder: shard.HolderIdentity(o.Identity, o.Incarnation), Recorder: mgr.GetEventRecorder("clustershard-remotecluster"),
		KubeConfig: o.KubeConfig, SecretNamespaces: o.SecretNamespaces, Kinds: o.Kinds, ProbeTimeout: o.ProbeTimeout, StopTimeout: o.Shard.StopTimeout,
		InstallTimeout: o.InstallTimeout, HelmTimeout: o.HelmTimeout, Workers: o.RemoteClusterWorkers,
		Charts: rp.charts, Enqueue: rp.notifier.Notify, Resync: o.Resync, CleanupTimeout: o.CleanupTimeout,
	}
	rp.notifier.OnLost = rec.Forget
	noOwner = rec.MarkNoOwner
	replicateRecorder := mgr.GetEventRecorder("clustershard-replicate")
	if err := controllers.Add(ctx, mgr, controllers.Set{
		RemoteCluster: rec,
		Replicate: func(k remotecopy.Kind) *replicate.Reconciler {
			return &replicate.Reconciler{
				Client: mgr.GetClient(), Registry: rp.Registry, Ownership: rp.Coordinator, Identity: o.Identity,
				Kind: k, Recorder: replicateRecorder, UnownedGrace: o.UnownedGrace, Recheck: o.Recheck,
				Workers: o.ReplicateWorkers,
			}
		},
		Kinds: o.Kinds, Subscribe: rp.notifier.Subscribe,
	}); err != nil {
		return nil, err
	}
	if err := mgr.Add(rp); err != nil {
		return nil, err
	}
	// Ready once membership is held: the coordinator runs only after the
	// manager's caches have synced, so this implies synced caches too.
	if err := mgr.AddReadyzCheck("membership", func(*http.Request) error {
		if !rp.Coordinator.Ready() {
			return errors.New("caches not synced or membership not held yet")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return rp, nil
}

// Start runs the coordinator once the caches have synced (it is a manager
// runnable); on shutdown it hands every cluster over before returning.
func (rp *Replica) Start(ctx context.Context) error {
	// Lease and RemoteCluster changes wake the coordinator at once.
	for _, obj := range []client.Object{&coordinationv1.Lease{}, &v1alpha1.RemoteCluster{}} {
		inf, err := rp.Manager.GetCache().GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { rp.Coordinator.Kick() },
			UpdateFunc: func(any, any) { rp.Coordinator.Kick() },
			DeleteFunc: func(any) { rp.Coordinator.Kick() },
		}); err != nil {
			return err
		}
	}
	err := rp.Coordinator.Run(ctx, rp.opts.ShutdownTimeout)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rp.opts.Shard.StopTimeout)
	defer cancel()
	err = errors.Join(err, rp.Registry.Close(cctx), rp.charts.Close(cctx))
	metrics.ClusterSeries.Remove(rp)
	metrics.Tracker.ForgetReplica(rp.opts.Identity)
	return err
}

// Owned implements metrics.ClusterSource.
func (rp *Replica) Owned() []string { return rp.Coordinator.Owned() }

// ManagerUp implements metrics.ClusterSource: the remote manager runs and
// its API server answers probes.
func (rp *Replica) ManagerUp(cluster string) bool {
	info, ok := rp.Registry.Get(cluster)
	return ok && info.State == registry.StateRunning
}

// NeedLeaderElection is false: every replica runs its coordinator.
func (rp *Replica) NeedLeaderElection() bool { return false }

// Run runs the replica until ctx ends, then hands over and stops.
func (rp *Replica) Run(ctx context.Context) error { return rp.Manager.Start(ctx) }

// learnShapes reads each replicated kind's CRD for the shape of its status
// (status subresource, required fields, what a condition keeps) and says
// once, at start-up, how its status is written.
func learnShapes(ctx context.Context, c client.Reader, kinds []remotecopy.Kind, log logr.Logger) []remotecopy.Kind {
	out := make([]remotecopy.Kind, 0, len(kinds))
	for _, k := range kinds {
		shape, err := remotecopy.LearnShape(ctx, c, k)
		switch {
		case err != nil:
			log.Error(err, "Cannot learn the status shape of a replicated kind; assuming a status subresource", "kind", k.GVK.String())
		case !shape.Status:
			log.Error(nil, "Replicated kind: its remote status cannot be mirrored; sources show the outcome in annotation "+v1alpha1.OutcomeAnnotation+" only", "kind", k.GVK.String(), "status", shape.String())
		default:
			log.Info("Replicated kind", "kind", k.GVK.String(), "status", shape.String(), "conditionFields", shape.ConditionFields)
		}
		out = append(out, k.WithShape(shape))
	}
	return out
}
