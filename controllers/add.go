package controllers

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/clustershard/clustershard/controllers/crdshape"
	"github.com/clustershard/clustershard/controllers/remotecluster"
	"github.com/clustershard/clustershard/controllers/replicate"
	"github.com/clustershard/clustershard/internal/remotecopy"
)

// Set is what Add registers: the RemoteCluster controller and, for each
// replicated kind, a replicate controller made from a template. The remote
// side (monitor.Module) is a remote module the registry runs in every
// remote manager, not a controller of this manager.
type Set struct {
	// RemoteCluster is the RemoteCluster controller, settings filled in.
	RemoteCluster *remotecluster.Reconciler
	// Replicate makes the replicate controller of one kind.
	Replicate func(remotecopy.Kind) *replicate.Reconciler
	// Kinds are the replicated kinds.
	Kinds []remotecopy.Kind
	// Subscribe returns a new channel of cluster events (a cluster
	// acquired, its manager running or stopped, lost) for one controller.
	Subscribe func() <-chan event.GenericEvent
}

// Add registers the management controllers of one replica with mgr: the
// RemoteCluster controller, one replicate controller per kind, and crdshape
// (which re-learns a kind's shape when its CRD changes) when any kind is
// replicated.
func Add(ctx context.Context, mgr ctrl.Manager, s Set) error {
	if err := s.RemoteCluster.SetupWithManager(ctx, mgr, s.Subscribe()); err != nil {
		return fmt.Errorf("remotecluster: %w", err)
	}
	for _, k := range s.Kinds {
		if err := s.Replicate(k).SetupWithManager(ctx, mgr, s.Subscribe()); err != nil {
			return fmt.Errorf("replicate %s: %w", k.GVK, err)
		}
	}
	if len(s.Kinds) > 0 {
		if err := (&crdshape.Reconciler{Client: mgr.GetClient(), Kinds: s.Kinds}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("crdshape: %w", err)
		}
	}
	return nil
}
