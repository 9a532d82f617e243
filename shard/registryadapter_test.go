package shard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/registry"
)

// Ownership drives real registries through the adapter: each cluster's
// remote manager runs on exactly one replica, moves on a graceful stop with
// no overlap, and a replica's writes for a cluster it does not own are fenced.
func TestRegistryDrivenByOwnership(t *testing.T) {
	ns := namespace(t, "adapter")
	clusters := names(6)
	tr := newTracker()
	in := map[string]*instance{}
	regs := map[string]*registry.Registry{}
	for _, n := range []string{"r0", "r1"} {
		adapter := &registryAdapter{
			Config: func(context.Context, string) (*rest.Config, []registry.SpawnOption, error) {
				return env.Remotes[0].Config, nil, nil
			},
			Logger: logger(),
		}
		in[n] = startInstance(t, ns, n, clusters, adapter)
		reg, err := registry.New(context.Background(), registry.Options{
			ManageClient: env.Client, Scheme: env.Scheme, Logger: logger(), Fence: in[n].c,
			OnEvent: func(e registry.Event) {
				switch e.State {
				case registry.StateRunning:
					tr.start(n, e.Cluster)
				case registry.StateStopped:
					tr.stop(n, e.Cluster)
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		adapter.Registry = reg
		regs[n] = reg
		t.Cleanup(func() { _ = reg.Close(context.Background()) })
	}
	want := expected(t, []string{"r0", "r1"}, clusters)
	settled(t, tr, ns, want, in, 60*time.Second)
	for c, owner := range want {
		other := "r1"
		if owner == "r1" {
			other = "r0"
		}
		if _, ok := regs[other].Get(c); ok {
			t.Fatalf("%s has a manager on %s, which does not own it", c, other)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "owned-"}}
		if err := regs[owner].WithClient(c, func(cl client.Client) error { return cl.Create(t.Context(), cm) }); err != nil {
			t.Fatalf("owner %s cannot write for %s: %v", owner, c, err)
		}
	}
	in["r0"].stop(t)
	want = expected(t, []string{"r1"}, clusters)
	settled(t, tr, ns, want, in, 20*time.Second)
	if names := regs["r0"].Names(); len(names) != 0 {
		t.Fatalf("the stopped replica still runs managers: %v", names)
	}
	// A spawn forced outside the protocol is fenced: no write for a cluster
	// this replica does not own.
	if err := regs["r0"].Spawn(clusters[0], env.Remotes[0].Config); err != nil {
		t.Fatal(err)
	}
	err := regs["r0"].WithClient(clusters[0], func(cl client.Client) error {
		return cl.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "zombie-"}})
	})
	if !errors.Is(err, registry.ErrFenced) {
		t.Fatalf("write by a non-owner: want ErrFenced, got %v", err)
	}
}

// configFunc returns the rest.Config (and spawn options) of a remote cluster.
type configFunc func(ctx context.Context, cluster string) (*rest.Config, []registry.SpawnOption, error)

// registryAdapter is a shard.Handler that drives a registry from ownership
// directly (spawn on acquired, stop on lost), for these tests; the replica
// drives its registry through its controllers. Paired with
// registry.Options.Fence set to the Coordinator, remote writes also stop the
// instant ownership does.
type registryAdapter struct {
	// Registry holds the remote managers.
	Registry *registry.Registry
	// Config resolves a cluster's connection.
	Config configFunc
	// Logger reports spawn failures.
	Logger logr.Logger
	// OnSpawnError, when set, is told about a failed spawn (for a retry).
	OnSpawnError func(cluster string, err error)
}

// Acquired spawns the cluster's remote manager; an existing one is kept.
func (a *registryAdapter) Acquired(ctx context.Context, cluster string) {
	cfg, opts, err := a.Config(ctx, cluster)
	if err == nil {
		err = a.Registry.Spawn(cluster, cfg, opts...)
		if errors.Is(err, registry.ErrAlreadyExist) {
			err = nil
		}
	}
	if err != nil {
		a.Logger.Error(err, "Cannot spawn the remote manager of an acquired cluster", "cluster", cluster)
		if a.OnSpawnError != nil {
			a.OnSpawnError(cluster, err)
		}
	}
}

// Lost stops the cluster's remote manager; an absent one is fine.
func (a *registryAdapter) Lost(ctx context.Context, cluster string) error {
	err := a.Registry.Stop(ctx, cluster)
	if errors.Is(err, registry.ErrNotExist) {
		return nil
	}
	return err
}
