package remotecluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remote"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/registry"
)

// probe asks the remote API server for /version.
func probe(ctx context.Context, cfg *rest.Config, timeout time.Duration) (string, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = timeout
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", err
	}
	ver, _, err := remote.Probe(ctx, dc.RESTClient(), timeout)
	return ver, err
}

func installCRDs(rc *v1alpha1.RemoteCluster) bool {
	return rc.Spec.Install == nil || rc.Spec.Install.CRDs == nil || *rc.Spec.Install.CRDs
}

// install ensures spec.install in the remote cluster: the replicated kinds'
// CRDs copied from the management cluster by server-side apply, the
// namespace, then the Helm release. It sets Installed on success, and
// returns errChartPending while the chart is being fetched.
func (r *Reconciler) install(ctx context.Context, rc *v1alpha1.RemoteCluster, cfg *rest.Config) error {
	wantCRDs := installCRDs(rc) && len(r.Kinds) > 0
	ns := ""
	if rc.Spec.Install != nil {
		ns = rc.Spec.Install.Namespace
	}
	wantHelm := rc.Spec.Install != nil && (rc.Spec.Install.Helm != nil || rc.Status.Helm != nil)
	if rc.Spec.Install == nil {
		// No cleanupPolicy any more: a release installed before is retained.
		rc.Status.Helm = nil
	}
	if !wantCRDs && ns == "" && !wantHelm {
		r.setCondition(rc, v1alpha1.ConditionInstalled, true, v1alpha1.ReasonNothingToInstall, "spec.install asks for nothing")
		return nil
	}
	var remote client.Client
	if wantCRDs || ns != "" { // the Helm release has its own client
		var err error
		if remote, err = r.remoteClient(cfg, rc.Name); err != nil {
			return fmt.Errorf("client for the remote cluster: %w", err)
		}
	}
	var applied, shippedNames []string
	current := 0
	if wantCRDs {
		// CRDs the Helm release ships have one writer, Helm: none is applied.
		shipped, err := r.shippedCRDs(rc)
		if err != nil {
			return err
		}
		for _, k := range r.Kinds {
			if shipped[k.CRD] {
				shippedNames = append(shippedNames, k.CRD)
				continue
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := r.Client.Get(ctx, client.ObjectKey{Name: k.CRD}, &crd); err != nil {
				return fmt.Errorf("read CRD %s from the management cluster: %w", k.CRD, err)
			}
			obj, err := crdApplyObject(&crd)
			if err != nil {
				return err
			}
			if crdCurrent(ctx, remote, obj) {
				current++ // applied by an earlier owner, unchanged since, served
				continue
			}
			if err := r.owned(rc.Name, func() error {
				return remote.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership)
			}); err != nil {
				return fmt.Errorf("apply CRD %s: %w", k.CRD, err)
			}
			applied = append(applied, k.CRD)
		}
		// The copied CRDs must be served before the remote manager watches them.
		for _, name := range applied {
			if err := waitEstablished(ctx, remote, name, r.installTimeout()); err != nil {
				return err
			}
		}
	}
	if ns != "" {
		if err := r.createNamespace(ctx, remote, rc.Name, ns); err != nil {
			return err
		}
	}
	msg := fmt.Sprintf("%d CRDs applied, %d current; namespace %q", len(applied), current, ns)
	if len(shippedNames) > 0 {
		msg = fmt.Sprintf("%d CRDs applied, %d current, %d shipped by the Helm release (%s); namespace %q", len(applied), current, len(shippedNames), strings.Join(shippedNames, ", "), ns)
	}
	if wantHelm {
		helm, err := r.ensureHelm(ctx, rc, cfg)
		if err != nil {
			return err
		}
		if helm != "" {
			msg += "; " + helm
		}
		// Helm installs its crds/ before the templates; the remote manager
		// watches them, so they must be served.
		for _, name := range shippedNames {
			if err := waitEstablished(ctx, remote, name, r.installTimeout()); err != nil {
				return fmt.Errorf("%w (it is in the chart's crds/, which Helm installs only with the release's first revision)", err)
			}
		}
	}
	r.setCondition(rc, v1alpha1.ConditionInstalled, true, v1alpha1.ReasonInstalled, msg)
	return nil
}

// createNamespace creates ns in the remote cluster, labelled as installed by
// clustershard, unless it exists.
func (r *Reconciler) createNamespace(ctx context.Context, remote client.Client, cluster, ns string) error {
	if err := remote.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); err == nil {
		return nil // no write when it is there already
	}
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{v1alpha1.InstalledByLabel: "clustershard"}}}
	if err := r.owned(cluster, func() error { return remote.Create(ctx, n) }); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}

// crdApplyObject strips a management CRD to what is applied remotely.
func crdApplyObject(crd *apiextensionsv1.CustomResourceDefinition) (*unstructured.Unstructured, error) {
	spec, err := json.Marshal(crd.Spec)
	if err != nil {
		return nil, err
	}
	var specMap map[string]any
	if err := json.Unmarshal(spec, &specMap); err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": specMap}}
	obj.SetAPIVersion("apiextensions.k8s.io/v1")
	obj.SetKind("CustomResourceDefinition")
	obj.SetName(crd.Name)
	obj.SetLabels(map[string]string{v1alpha1.InstalledByLabel: "clustershard"})
	// The hash of what is applied, recorded with it: the next owner compares
	// instead of applying (a no-op apply of a large CRD still costs the
	// remote API server a full write).
	sum := sha256.Sum256(spec)
	obj.SetAnnotations(map[string]string{v1alpha1.InstallHashAnnotation: hex.EncodeToString(sum[:8])})
	return obj, nil
}

// crdCurrent reports whether the remote CRD is what obj applies (its
// install hash and its clustershard label) and is established. A failed
// read counts as not current: the apply runs as before.
func crdCurrent(ctx context.Context, c client.Client, obj *unstructured.Unstructured) bool {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: obj.GetName()}, &crd); err != nil {
		return false
	}
	if crd.Annotations[v1alpha1.InstallHashAnnotation] != obj.GetAnnotations()[v1alpha1.InstallHashAnnotation] ||
		crd.Labels[v1alpha1.InstalledByLabel] != obj.GetLabels()[v1alpha1.InstalledByLabel] || !crd.DeletionTimestamp.IsZero() {
		return false
	}
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func waitEstablished(ctx context.Context, c client.Client, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err == nil {
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established in the remote cluster: %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// uninstall removes what clustershard installed: the Helm release (the one
// asked for and the one last deployed), the CRDs, and the namespaces it
// created.
func (r *Reconciler) uninstall(ctx context.Context, rc *v1alpha1.RemoteCluster) error {
	cfg, err := r.restConfigFor(ctx, rc)
	if err != nil {
		return err
	}
	// The manager has stopped: the clean-up is an epoch of its own, raised
	// in full (the policy may have been removed since).
	epoch, err := r.raiseEpoch(ctx, rc, cfg, "")
	if err != nil {
		return err
	}
	cfg = epoch.Config(cfg)
	remote, err := r.remoteClient(cfg, rc.Name)
	if err != nil {
		return err
	}
	var errs []error
	releases := map[[2]string]bool{}
	if h := rc.Spec.Install.Helm; h != nil {
		releases[[2]string{h.Namespace, h.ReleaseName}] = true
	}
	if h := rc.Status.Helm; h != nil {
		releases[[2]string{h.Namespace, h.ReleaseName}] = true
	}
	for rel := range releases {
		if err := r.uninstallHelm(ctx, rc, cfg, rel[0], rel[1]); err != nil {
			errs = append(errs, err)
		}
	}
	if installCRDs(rc) {
		if err := r.uninstallCRDs(ctx, rc, remote); err != nil {
			errs = append(errs, err)
		}
	}
	if ns := rc.Spec.Install.Namespace; ns != "" {
		if err := r.deleteInstalledNamespace(ctx, remote, rc.Name, ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// uninstallCRDs deletes the replicated kinds' CRDs that clustershard
// created in the remote cluster (labelled v1alpha1.InstalledByLabel, not shipped by the
// Helm release) and that hold no object but this RemoteCluster's copies:
// deleting a CRD deletes all its objects, and the others are not ours to
// delete. A CRD kept
// for that reason is reported in a Warning event on the RemoteCluster.
func (r *Reconciler) uninstallCRDs(ctx context.Context, rc *v1alpha1.RemoteCluster, remote client.Client) error {
	shipped, err := r.shippedCRDs(rc)
	if err != nil {
		// Without the chart, a CRD it may ship is told by its label alone.
		log.FromContext(ctx).Info("Cannot read the chart's crds/ for the uninstall; deleting only CRDs labelled as clustershard's", "error", err.Error())
		shipped = map[string]bool{}
	}
	var errs []error
	var kept []string
	for _, k := range r.Kinds {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := remote.Get(ctx, client.ObjectKey{Name: k.CRD}, &crd); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("read CRD %s: %w", k.CRD, err))
			}
			continue
		}
		if crd.Labels[v1alpha1.InstalledByLabel] != "clustershard" || shipped[k.CRD] {
			continue // not ours: someone else installed it
		}
		foreign, err := foreignObject(ctx, remote, k, rc.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("list the objects of CRD %s: %w", k.CRD, err))
			continue
		}
		if foreign != "" {
			kept = append(kept, fmt.Sprintf("%s (holds %s)", k.CRD, foreign))
			continue
		}
		uid := crd.UID
		if err := r.owned(rc.Name, func() error { return remote.Delete(ctx, &crd, client.Preconditions{UID: &uid}) }); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete CRD %s: %w", k.CRD, err))
		}
	}
	if len(kept) > 0 {
		r.event(rc, corev1.EventTypeWarning, v1alpha1.ReasonCRDKept, "Kept CRDs in the remote cluster: %s", strings.Join(kept, "; "))
		log.FromContext(ctx).Info("Kept CRDs holding objects clustershard did not create", "crds", kept)
	}
	return errors.Join(errs...)
}

// foreignObject describes an object of kind k in the remote cluster that is
// not a copy made for RemoteCluster cluster, or returns "".
func foreignObject(ctx context.Context, remote client.Client, k remotecopy.Kind, cluster string) (string, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
	opts := []client.ListOption{client.Limit(500)}
	for {
		if err := remote.List(ctx, list, opts...); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				return "", nil // the version is not served: no objects of it
			}
			return "", err
		}
		for _, o := range list.Items {
			key := client.ObjectKeyFromObject(&o).String()
			switch l := o.GetLabels(); {
			case l[v1alpha1.ControlledByLabel] != v1alpha1.ControlledByValue:
				return key + ", which clustershard did not create", nil
			case l[v1alpha1.CopyClusterLabel] != cluster:
				// Two RemoteClusters may name one cluster: the other's copies are not ours.
				return key + ", a copy for RemoteCluster " + l[v1alpha1.CopyClusterLabel], nil
			}
		}
		if list.GetContinue() == "" {
			return "", nil
		}
		opts = []client.ListOption{client.Limit(500), client.Continue(list.GetContinue())}
	}
}

// remoteClient is a direct client of the remote cluster whose writes pass the
// ownership fence, bounded by its deadline, both before client-go's rate
// limiter and in its transport (registry.FencedConfig: the server-side
// timeout, and the writes in doubt a hand-over waits out).
func (r *Reconciler) remoteClient(cfg *rest.Config, cluster string) (client.Client, error) {
	c, err := client.New(registry.FencedConfig(cfg, cluster, r.Ownership), client.Options{Scheme: r.Scheme})
	if err != nil {
		return nil, err
	}
	return registry.FencedClient(c, cluster, r.Ownership), nil
}
