package shard

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/clustershard/clustershard/registry"
)

// ConfigFunc returns the rest.Config (and spawn options) of a remote cluster.
type ConfigFunc func(ctx context.Context, cluster string) (*rest.Config, []registry.SpawnOption, error)

// RegistryAdapter is the Handler that drives a registry from ownership:
// spawn on acquired, stop on lost. Pair it with registry.Options.Fence set to
// the Coordinator, so remote writes also stop the instant ownership does.
type RegistryAdapter struct {
	// Registry holds the remote managers.
	Registry *registry.Registry
	// Config resolves a cluster's connection.
	Config ConfigFunc
	// Logger reports spawn failures.
	Logger logr.Logger
	// OnSpawnError, when set, is told about a failed spawn (for a retry).
	OnSpawnError func(cluster string, err error)
}

// Acquired spawns the cluster's remote manager; an existing one is kept.
func (a *RegistryAdapter) Acquired(ctx context.Context, cluster string) {
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
func (a *RegistryAdapter) Lost(ctx context.Context, cluster string) error {
	err := a.Registry.Stop(ctx, cluster)
	if errors.Is(err, registry.ErrNotExist) {
		return nil
	}
	return err
}
