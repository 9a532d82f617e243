package monitor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/fx"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/registry"
)

// Params are what the monitor takes from its remote fx app.
type Params struct {
	fx.In

	Manager     manager.Manager
	Remote      client.Client
	Manage      client.Client `name:"manage-client"`
	Fresh       client.Reader `name:"manage-reader"`
	ClusterName string        `name:"cluster-name"`
	Naming      registry.Naming
}

// Module returns the remote module that runs one monitor per replicated kind.
// identity is this replica's name, stamped on copies it re-creates.
func Module(kinds []remotecopy.Kind, identity string) fx.Option {
	return fx.Module("monitor", fx.Invoke(func(p Params) error {
		for _, k := range kinds {
			ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
				l := o.GetLabels()
				return l[v1alpha1.ControlledByLabel] == v1alpha1.ControlledByValue && l[v1alpha1.CopyClusterLabel] == p.ClusterName
			})
			r := &Reconciler{Kind: k, Remote: p.Remote, Manage: p.Manage, Fresh: p.Fresh, Cluster: p.ClusterName, Identity: identity}
			err := ctrl.NewControllerManagedBy(p.Manager).
				Named(p.Naming.Controller("monitor-"+strings.ToLower(k.GVK.Kind))).
				For(k.New(), builder.WithPredicates(ours)).
				Complete(r)
			if err != nil {
				return err
			}
		}
		return nil
	}))
}

// Reconciler mirrors one kind's copies in one remote cluster.
type Reconciler struct {
	// Kind is the replicated kind.
	Kind remotecopy.Kind
	// Remote is the remote cluster's client; Manage the management cluster's.
	Remote, Manage client.Client
	// Fresh reads the management cluster from its API server; it confirms
	// that a source is gone before its copy is deleted (Manage's cache may
	// lag). Manage when nil.
	Fresh client.Reader
	// Cluster is the remote cluster's name.
	Cluster string
	// Identity is this replica's name.
	Identity string
}

// Reconcile mirrors a copy's status to its source, or repairs the copy.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	src := r.Kind.New()
	srcErr := r.Manage.Get(ctx, req.NamespacedName, src)
	if srcErr != nil && !apierrors.IsNotFound(srcErr) {
		return ctrl.Result{}, srcErr
	}
	srcLives := srcErr == nil && src.GetDeletionTimestamp().IsZero() && r.Kind.Cluster(src) == r.Cluster

	cp := r.Kind.New()
	if err := r.Remote.Get(ctx, req.NamespacedName, cp); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		if srcLives {
			// Deleted by hand while its source lives: put it back.
			return ctrl.Result{}, r.Remote.Apply(ctx, client.ApplyConfigurationFromUnstructured(r.Kind.Copy(src, r.Cluster, r.Identity)),
				client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership)
		}
		return ctrl.Result{}, nil
	}
	if r.orphan(src, srcErr) {
		// The cache says the source is gone (or not this cluster's): confirm
		// with the API server, which a lagging cache must not overrule.
		fresh := r.Kind.New()
		srcErr = r.fresh().Get(ctx, req.NamespacedName, fresh)
		if srcErr != nil && !apierrors.IsNotFound(srcErr) {
			return ctrl.Result{}, srcErr
		}
		if r.orphan(fresh, srcErr) {
			uid := cp.GetUID()
			return ctrl.Result{}, client.IgnoreNotFound(r.Remote.Delete(ctx, cp, client.Preconditions{UID: &uid}))
		}
		src = fresh
		srcLives = src.GetDeletionTimestamp().IsZero() && r.Kind.Cluster(src) == r.Cluster
	}
	if !srcLives {
		return ctrl.Result{}, nil // the source is being deleted: replicate removes the copy
	}
	status, found, _ := unstructured.NestedMap(cp.Object, "status")
	if !found {
		return ctrl.Result{}, nil
	}
	_, err := remotecopy.MirrorStatus(ctx, r.Manage, r.Kind, src, status)
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil // the source changed meanwhile: mirror onto the new one
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("mirror the status of the copy in %q to its source (%s): %w", r.Cluster, r.Kind.Shape(), err)
	}
	return ctrl.Result{}, nil
}

// orphan tells whether a copy's source, as read (err from the read), is gone
// or belongs to no copy in this cluster.
func (r *Reconciler) orphan(src client.Object, err error) bool {
	if apierrors.IsNotFound(err) {
		return true
	}
	u, ok := src.(*unstructured.Unstructured)
	return err == nil && ok && r.Kind.Cluster(u) != r.Cluster && u.GetAnnotations()[v1alpha1.ReplicatedToAnnotation] != r.Cluster
}

func (r *Reconciler) fresh() client.Reader {
	if r.Fresh != nil {
		return r.Fresh
	}
	return r.Manage
}
