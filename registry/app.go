package registry

import (
	"context"
	"log/slog"

	"github.com/go-logr/logr"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Names of the values a remote fx app provides besides its unnamed remote
// *rest.Config, *runtime.Scheme, manager.Manager and client.Client.
const (
	// ClusterNameTag is the fx name of the remote cluster's name (a string).
	ClusterNameTag = "cluster-name"
	// ManageClientTag is the fx name of the management cluster's client.Client.
	ManageClientTag = "manage-client"
	// ManageReaderTag is the fx name of a client.Reader that reads the
	// management cluster from its API server, not a cache: how a remote
	// module confirms that a source is gone before it deletes anything.
	ManageReaderTag = "manage-reader"
)

// newApp assembles the fx app of one entry: the values every remote module
// may ask for, the remote manager with its lifecycle, then the remote modules.
func (r *Registry) newApp(e *entry) *fx.App {
	// The management client handed to remote modules passes the same gate and
	// fence: writes made on behalf of a cluster stop with its ownership.
	var manageReader client.Reader = r.opts.ManageClient
	if r.opts.ManageReader != nil {
		manageReader = r.opts.ManageReader
	}
	manageClient := e.gate.guard(r.opts.ManageClient, manageReader)
	// The *rest.Config modules get, and the manager is built from (its
	// event recorder, its HTTP client), fences writes at the transport, so a
	// module that builds its own client writes nothing unowned either.
	cfg := e.cfg
	if r.opts.Fence != nil {
		cfg = FencedConfig(e.cfg, e.name, r.opts.Fence)
	}
	return fx.New(
		fx.WithLogger(func() fxevent.Logger { return newFxLogger(e.log) }),
		fx.StartTimeout(r.opts.StartTimeout),
		fx.Module("remote-cluster",
			fx.Supply(cfg, r.opts.Scheme),
			fx.Provide(
				fx.Annotate(func() string { return e.name }, fx.ResultTags(`name:"`+ClusterNameTag+`"`)),
				fx.Annotate(func() client.Client { return manageClient }, fx.ResultTags(`name:"`+ManageClientTag+`"`)),
				fx.Annotate(func() client.Reader { return manageReader }, fx.ResultTags(`name:"`+ManageReaderTag+`"`)),
				e.newManager,
				func(mgr manager.Manager) client.Client { return mgr.GetClient() },
				func() Naming { return Naming{cluster: e.name, shared: r.opts.SharedControllerNames} },
			),
			fx.Invoke(e.runManager),
			fx.Populate(&e.client, &e.mgr),
		),
		fx.Options(r.opts.RemoteModules...),
	)
}

// newManager builds the remote manager: no metrics server, no health probes,
// no leader election, no webhook server; optionally a namespace-limited cache;
// a client whose calls pass the entry's gate and fence.
func (e *entry) newManager(cfg *rest.Config, scheme *runtime.Scheme) (manager.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	opts := manager.Options{
		Scheme:                 scheme,
		Logger:                 e.log, // carries "cluster"
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		// Names are made unique per cluster by ControllerName, and the
		// registry never runs two managers for one cluster, so the
		// process-wide name check (which never forgets a name, Chaos Mesh
		// issue #4791) would only break re-spawning a cluster.
		Controller:              config.Controller{SkipNameValidation: ptr.To(true)},
		GracefulShutdownTimeout: ptr.To(e.stopGrace),
		NewClient: func(cfg *rest.Config, o client.Options) (client.Client, error) {
			// Unstructured objects (the replicated kinds) are read from the
			// cache like typed ones: the controllers watch them anyway, and
			// each uncached Get is a round trip to the remote (3.9 per
			// replicated object, before). Reads that must be fresh ask for
			// Live.
			live, err := client.New(cfg, client.Options{HTTPClient: o.HTTPClient, Scheme: o.Scheme, Mapper: o.Mapper})
			if err != nil {
				return nil, err
			}
			if o.Cache != nil {
				cacheOpts := *o.Cache
				cacheOpts.Unstructured = true
				o.Cache = &cacheOpts
			}
			c, err := client.New(cfg, o)
			if err != nil {
				return nil, err
			}
			return e.gate.guard(c, live), nil
		},
	}
	if len(e.namespaces) > 0 {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range e.namespaces {
			opts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return manager.New(cfg, opts)
}

// runManager ties the manager to the app's lifecycle: OnStart starts it in a
// goroutine and returns; OnStop cancels it and waits for it, bounded by the
// stop context.
//
// The manager's context is deliberately not derived from the gate's: the gate
// closes first on Stop, and cancelling a manager whose runnable groups are
// still starting makes controller-runtime v0.25 spin in runnableGroup.Start
// (upstream PR #3440). Spawn waits until the manager has fully started for the
// same reason.
func (e *entry) runManager(lc fx.Lifecycle, mgr manager.Manager) {
	ctx, cancel := context.WithCancel(e.parent)
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			go func() {
				defer close(e.mgrDone)
				e.managerExited(mgr.Start(ctx))
			}()
			return nil
		},
		OnStop: func(stopCtx context.Context) error {
			cancel()
			select {
			case <-e.mgrDone:
				return nil
			case <-stopCtx.Done():
				return stopCtx.Err()
			}
		},
	})
}

// ControllerName returns a controller name unique to one remote cluster.
func ControllerName(cluster, name string) string { return name + "-" + cluster }

// Naming names the controllers of remote modules; the registry provides it
// to every remote fx app.
type Naming struct {
	cluster string
	shared  bool
}

// Controller returns the name of a remote controller: unique to the cluster
// (ControllerName), or, with Options.SharedControllerNames, the same in every
// cluster so controller-runtime's controller and workqueue series add up
// across clusters instead of one set per cluster.
func (n Naming) Controller(name string) string {
	if n.shared {
		return name
	}
	return ControllerName(n.cluster, name)
}

// newFxLogger bridges fx's events to logr: errors at error level, the rest at V(4).
func newFxLogger(log logr.Logger) fxevent.Logger {
	l := &fxevent.SlogLogger{Logger: slog.New(logr.ToSlogHandler(log.WithName("fx")))}
	l.UseLogLevel(slog.LevelDebug) // logr V(4)
	return l
}
