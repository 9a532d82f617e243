package replica

import (
	"context"
	"errors"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/registry"
)

// Notifier is the glue between ownership, the registry and the
// controllers: it turns ownership changes (it is the shard coordinator's
// Handler) and registry state changes into events for the controllers, a
// generic event carrying a RemoteCluster named after the cluster, sent to
// every subscriber. Lost clusters are stopped in the registry before Lost
// returns (stop before release). The coordinator needs it before the
// registry exists and the registry needs the coordinator, so New sets
// Registry, OnRunning and OnLost once both exist, before anything starts.
type Notifier struct {
	// Registry is stopped for lost clusters.
	Registry *registry.Registry
	// OnRunning, when set, is told each time a remote manager reaches
	// Running (the coordinator measures hand-overs with it).
	OnRunning func(cluster string)
	// OnLost, when set, is told of every lost cluster once its manager was
	// asked to stop (the Reconciler forgets what it kept of the ownership
	// period: its epoch, its install).
	OnLost func(cluster string)

	mu   sync.Mutex
	subs []chan event.GenericEvent
}

// Subscribe returns a channel of cluster events; call before the manager starts.
func (n *Notifier) Subscribe() <-chan event.GenericEvent {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch := make(chan event.GenericEvent, 4096)
	n.subs = append(n.subs, ch)
	return ch
}

// Notify sends an event for cluster to every subscriber without blocking; a
// full subscriber misses it (counted in
// clustershard_cluster_events_dropped_total) and catches up on its periodic
// resync or re-check.
func (n *Notifier) Notify(cluster string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ch := range n.subs {
		select {
		case ch <- event.GenericEvent{Object: &v1alpha1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}}}:
		default:
			metrics.ClusterEventsDropped.Inc()
		}
	}
}

// Acquired implements shard.Handler: the controllers spawn and sync.
func (n *Notifier) Acquired(_ context.Context, cluster string) { n.Notify(cluster) }

// Lost implements shard.Handler: the remote manager is stopped here.
func (n *Notifier) Lost(ctx context.Context, cluster string) error {
	err := n.Registry.Stop(ctx, cluster)
	if n.OnLost != nil {
		n.OnLost(cluster)
	}
	if errors.Is(err, registry.ErrNotExist) {
		return nil
	}
	return err
}

// RegistryEvent is the registry's OnEvent: a manager failed, became
// unhealthy or recovered.
func (n *Notifier) RegistryEvent(e registry.Event) {
	if e.State == registry.StateRunning && n.OnRunning != nil {
		n.OnRunning(e.Cluster)
	}
	n.Notify(e.Cluster)
}
