package replica

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/clustershard/clustershard/controllers/remotecluster"
	"github.com/clustershard/clustershard/controllers/replicate"
	"github.com/clustershard/clustershard/internal/helmrelease"
	"github.com/clustershard/clustershard/internal/remote"
	"github.com/clustershard/clustershard/registry"
	"github.com/clustershard/clustershard/shard"
)

// Defaults of the assembly: the hand-over bound on shutdown (unless
// Options.ShutdownTimeout says otherwise), and the rate limits of the
// management cluster's client (Leases, RemoteClusters, sources), which the
// command sets on its rest.Config. A replicated source costs about three
// management writes (finalizer, outcome, condition): at 50 requests a
// second one replica synced at most 17 sources a second, whatever the API
// server could take. The API server's own priority and fairness still
// protects it from a replica catching up with a large fleet.
const (
	DefaultShutdownTimeout = 45 * time.Second
	DefaultKubeAPIQPS      = 300
	DefaultKubeAPIBurst    = 600
)

// defaults fills what the assembly itself uses; each library fills the rest
// from its own Default* constants (shard, registry, remotecluster,
// replicate), which are also the defaults of the flags. The shard timings
// are filled here because other parts are derived from them.
func (o *Options) defaults() {
	if len(o.SecretNamespaces) == 0 {
		o.SecretNamespaces = []string{o.Namespace}
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.Shard.LeaseDuration == 0 {
		o.Shard.LeaseDuration = shard.DefaultLeaseDuration
	}
	if o.Shard.StopTimeout == 0 {
		o.Shard.StopTimeout = shard.DefaultStopTimeout
	}
	if o.UnownedGrace == 0 {
		// Two lease durations: a crash take-over (a lease duration, then
		// the spawn) is not reported; a cluster stuck longer is.
		o.UnownedGrace = 2 * o.Shard.LeaseDuration
	}
}

// DefaultOptions returns the options with every timing and limit at the
// default of the package that owns it; the replica's flags take their
// defaults from here, so each default is written once.
func DefaultOptions() Options {
	o := Options{
		Shard: shard.Options{
			LeaseDuration: shard.DefaultLeaseDuration, RenewDeadline: shard.DefaultRenewDeadline,
			RetryPeriod: shard.DefaultRetryPeriod, StopTimeout: shard.DefaultStopTimeout,
			MovesPerSecond: shard.DefaultMovesPerSecond,
		},
		ProbeInterval: registry.DefaultProbeInterval, ProbeTimeout: registry.DefaultProbeTimeout,
		ProbeFailureThreshold: registry.DefaultProbeFailureThreshold,
		RemoteStartTimeout:    registry.DefaultStartTimeout,
		Resync:                remotecluster.DefaultResync, CleanupTimeout: remotecluster.DefaultCleanupTimeout,
		InstallTimeout: remotecluster.DefaultInstallTimeout, HelmTimeout: remotecluster.DefaultHelmTimeout,
		Recheck: replicate.DefaultRecheck, ReplicateWorkers: replicate.DefaultWorkers,
		RemoteClusterWorkers: remotecluster.DefaultWorkers,
		Charts:               helmrelease.Options{Timeout: helmrelease.DefaultFetchTimeout},
	}
	o.KubeConfig.QPS, o.KubeConfig.Burst, o.KubeConfig.Timeout = registry.DefaultQPS, registry.DefaultBurst, remote.DefaultTimeout
	o.defaults()
	return o
}

// namespaceSet is the cache configuration of a list of namespaces.
func namespaceSet(ns []string) map[string]cache.Config {
	out := make(map[string]cache.Config, len(ns))
	for _, n := range ns {
		out[n] = cache.Config{}
	}
	return out
}
