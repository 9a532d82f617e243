package crdshape

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/clustershard/clustershard/internal/remotecopy"
)

// ControllerName names the controller.
const ControllerName = "crdshape"

// Reconciler re-learns the shape of the replicated kinds whose CRD changed.
type Reconciler struct {
	// Client reads CRDs of the management cluster.
	Client client.Reader
	// Kinds are the replicated kinds, each with its shape set (WithShape):
	// SetShape on them reaches every controller that holds a copy.
	Kinds []remotecopy.Kind
}

// Reconcile learns the shape of the kinds served by one CRD.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	for _, k := range r.Kinds {
		if k.CRD != req.Name {
			continue
		}
		shape, err := remotecopy.LearnShape(ctx, r.Client, k)
		if apierrors.IsNotFound(err) {
			logger.Error(err, "The CRD of a replicated kind was deleted; its sources are gone with it, the kind keeps its last shape", "kind", k.GVK.String())
			continue
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		if !k.SetShape(shape) {
			continue
		}
		if !shape.Status {
			logger.Error(nil, "Replicated kind changed: its remote status cannot be mirrored", "kind", k.GVK.String(), "status", shape.String())
			continue
		}
		logger.Info("Replicated kind changed shape", "kind", k.GVK.String(), "status", shape.String(), "conditionFields", shape.ConditionFields)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager watches the CRDs of r.Kinds (the manager already caches
// CRDs: spec.install copies them into remote clusters).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	names := map[string]bool{}
	for _, k := range r.Kinds {
		names[k.CRD] = true
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&apiextensionsv1.CustomResourceDefinition{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return names[o.GetName()]
		}))).
		Complete(r)
}
