package remotecluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/helmrelease"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/registry"
)

// errChartPending says the chart is being fetched; the cluster is
// reconciled again when the fetch ends.
var errChartPending = errors.New("chart pending")

// helmConfig is the remote rest.Config for Helm: every write passes the
// ownership fence, and each request is bounded.
func (r *Reconciler) helmConfig(cfg *rest.Config, cluster string) *rest.Config {
	hc := registry.FencedConfig(cfg, cluster, r.Ownership)
	if hc.Timeout == 0 {
		hc.Timeout = r.KubeConfig.Timeout
	}
	return hc
}

// ensureHelm installs or upgrades spec.install.helm in the remote cluster and
// records the release in status.helm. A release recorded in status but no
// longer asked for (removed, or another name or namespace) is uninstalled
// under cleanupPolicy Delete, and forgotten otherwise. It returns
// errChartPending while the chart is fetched. The Helm operation runs inside
// WithOwnership, so a hand-over waits for it, and each of its writes passes
// the fence.
func (r *Reconciler) ensureHelm(ctx context.Context, rc *v1alpha1.RemoteCluster, cfg *rest.Config) (string, error) {
	want := rc.Spec.Install.Helm
	if prev := rc.Status.Helm; prev != nil && (want == nil || prev.ReleaseName != want.ReleaseName || prev.Namespace != want.Namespace) {
		if rc.Spec.Install.CleanupPolicy == v1alpha1.CleanupDelete {
			if err := r.uninstallHelm(ctx, rc, cfg, prev.Namespace, prev.ReleaseName); err != nil {
				return "", fmt.Errorf("uninstall the release %s/%s no longer asked for: %w", prev.Namespace, prev.ReleaseName, err)
			}
		}
		rc.Status.Helm = nil
	}
	if want == nil {
		return "", nil
	}
	vals, err := helmrelease.ParseValues(want.Values)
	if err != nil {
		return "", err
	}
	ch, err := r.chart(rc.Name, want)
	if err != nil {
		return "", err
	}
	logger := log.FromContext(ctx).WithName("helm").WithValues("release", want.Namespace+"/"+want.ReleaseName)
	hc, err := helmrelease.NewClient(r.helmConfig(cfg, rc.Name), want.Namespace, logger)
	if err != nil {
		return "", err
	}
	defer hc.Close()
	var res helmrelease.Result
	err = r.owned(rc.Name, func() error {
		var err error
		res, err = hc.Ensure(ctx, helmrelease.Spec{
			Name: want.ReleaseName, Namespace: want.Namespace, Chart: ch, Values: vals, Timeout: r.helmTimeout(),
			NamespaceLabels: map[string]string{v1alpha1.InstalledByLabel: "clustershard"},
		})
		return err
	})
	countHelm(res, err)
	recovered := ""
	if res.Recovered {
		recovered = fmt.Sprintf("; found %s, left by an interrupted operation (a replica stopped or cut mid-way), and redid it", res.Found)
		if err != nil {
			r.event(rc, corev1.EventTypeWarning, v1alpha1.ReasonHelmRecovered, "Release %s/%s: found %s, left by an interrupted operation; removed it, but redoing it failed: %v", want.Namespace, want.ReleaseName, res.Found, err)
		} else {
			r.event(rc, corev1.EventTypeNormal, v1alpha1.ReasonHelmRecovered, "Release %s/%s: found %s, left by an interrupted operation (a replica stopped or cut mid-way); removed it and %s the release at revision %d, no failed revision", want.Namespace, want.ReleaseName, res.Found, res.Action, res.Release.Version)
		}
	}
	if err != nil {
		// Status shows the latest stored revision (a failed one, say).
		if hist, herr := hc.History(want.ReleaseName); herr == nil && len(hist) > 0 {
			rc.Status.Helm = helmStatus(hist[len(hist)-1])
		}
		return "", err
	}
	rc.Status.Helm = helmStatus(res.Release)
	rel := res.Release
	switch res.Action {
	case helmrelease.ActionInstalled, helmrelease.ActionReinstalled:
		r.event(rc, corev1.EventTypeNormal, v1alpha1.ReasonHelmInstalled, "Release %s/%s %s: chart %s-%s, revision %d", want.Namespace, want.ReleaseName, res.Action, rel.Chart.Metadata.Name, rel.Chart.Metadata.Version, rel.Version)
	case helmrelease.ActionUpgraded:
		r.event(rc, corev1.EventTypeNormal, v1alpha1.ReasonHelmUpgraded, "Release %s/%s upgraded: chart %s-%s, revision %d", want.Namespace, want.ReleaseName, rel.Chart.Metadata.Name, rel.Chart.Metadata.Version, rel.Version)
	}
	return fmt.Sprintf("Helm release %s/%s revision %d (chart %s-%s)%s", want.Namespace, want.ReleaseName, rel.Version, rel.Chart.Metadata.Name, rel.Chart.Metadata.Version, recovered), nil
}

// chart returns the chart of want from the cache, or errChartPending while
// it is fetched (the cluster is enqueued again when the fetch ends).
func (r *Reconciler) chart(cluster string, want *v1alpha1.HelmInstall) (*chart.Chart, error) {
	if r.Charts == nil {
		return nil, errors.New("spec.install.helm is set but this replica has no chart cache")
	}
	ch, err := r.Charts.Chart(helmrelease.Ref{Chart: want.Chart, Version: want.Version}, func() {
		if r.Enqueue != nil {
			r.Enqueue(cluster)
		}
	})
	if errors.Is(err, helmrelease.ErrFetching) {
		return nil, fmt.Errorf("%w: %w", errChartPending, err)
	}
	return ch, err
}

// shippedCRDs returns the CRDs the chart of spec.install.helm ships in crds/:
// Helm is their one writer, so spec.install.crds leaves them alone.
func (r *Reconciler) shippedCRDs(rc *v1alpha1.RemoteCluster) (map[string]bool, error) {
	out := map[string]bool{}
	if rc.Spec.Install == nil || rc.Spec.Install.Helm == nil {
		return out, nil
	}
	ch, err := r.chart(rc.Name, rc.Spec.Install.Helm)
	if err != nil {
		return nil, err
	}
	names, err := helmrelease.CRDNames(ch)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		out[n] = true
	}
	return out, nil
}

// recheckHelm is the periodic check of the Helm release of a running
// manager: Installed stays as it was unless the release needed repair.
func (r *Reconciler) recheckHelm(ctx context.Context, rc *v1alpha1.RemoteCluster, cfg *rest.Config) error {
	msg, err := r.ensureHelm(ctx, rc, cfg)
	if err != nil {
		return err
	}
	if c := meta.FindStatusCondition(rc.Status.Conditions, v1alpha1.ConditionInstalled); c == nil || c.Status != metav1.ConditionTrue {
		r.setCondition(rc, v1alpha1.ConditionInstalled, true, v1alpha1.ReasonInstalled, msg)
	}
	return nil
}

// countHelm counts what Ensure did, or failed to do.
func countHelm(res helmrelease.Result, err error) {
	result := metrics.ResultSuccess
	switch {
	case errors.Is(err, helmrelease.ErrInterrupted):
		result = metrics.ResultInterrupted
	case err != nil:
		result = metrics.ResultFailure
	}
	if res.Recovered {
		metrics.HelmOperations.WithLabelValues(metrics.HelmRecover, metrics.ResultSuccess).Inc()
	}
	switch res.Action {
	case helmrelease.ActionInstalled, helmrelease.ActionReinstalled:
		metrics.HelmOperations.WithLabelValues(metrics.HelmInstall, result).Inc()
	case helmrelease.ActionUpgraded:
		metrics.HelmOperations.WithLabelValues(metrics.HelmUpgrade, result).Inc()
	default: // the release was read and found up to date, or could not be read
		metrics.HelmOperations.WithLabelValues(metrics.HelmCheck, result).Inc()
	}
}

// installFailure is the reason of Installed for err, an install that did
// not succeed: HelmInterrupted when a Helm operation stopped at a write
// without a decision (no failed revision; the next try redoes it).
func installFailure(err error) string {
	if errors.Is(err, helmrelease.ErrInterrupted) {
		return v1alpha1.ReasonHelmInterrupted
	}
	return v1alpha1.ReasonInstallFailed
}

// helmStatus is status.helm for a revision.
func helmStatus(rel *release.Release) *v1alpha1.HelmReleaseStatus {
	s := &v1alpha1.HelmReleaseStatus{
		ReleaseName: rel.Name, Namespace: rel.Namespace, Revision: rel.Version,
		ValuesHash: helmrelease.HashValues(rel.Config),
	}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		s.Chart, s.Version, s.AppVersion = rel.Chart.Metadata.Name, rel.Chart.Metadata.Version, rel.Chart.Metadata.AppVersion
	}
	if rel.Info != nil {
		s.Status = rel.Info.Status.String()
		if !rel.Info.LastDeployed.IsZero() {
			t := metav1.NewTime(rel.Info.LastDeployed.Time.Truncate(time.Second))
			s.LastDeployed = &t
		}
	}
	return s
}

// uninstallHelm uninstalls a release, then deletes its namespace when
// clustershard created it.
func (r *Reconciler) uninstallHelm(ctx context.Context, rc *v1alpha1.RemoteCluster, cfg *rest.Config, ns, name string) error {
	hcfg := r.helmConfig(cfg, rc.Name)
	hc, err := helmrelease.NewClient(hcfg, ns, log.FromContext(ctx).WithName("helm").WithValues("release", ns+"/"+name))
	if err != nil {
		return err
	}
	defer hc.Close()
	var uninstalled bool
	if err := r.owned(rc.Name, func() (err error) {
		uninstalled, err = hc.Uninstall(ctx, name, r.helmTimeout())
		return err
	}); err != nil {
		result := metrics.ResultFailure
		if errors.Is(err, helmrelease.ErrInterrupted) {
			result = metrics.ResultInterrupted
		}
		metrics.HelmOperations.WithLabelValues(metrics.HelmUninstall, result).Inc()
		return err
	}
	if uninstalled { // a retried finalizer finds nothing left: not counted twice
		metrics.HelmOperations.WithLabelValues(metrics.HelmUninstall, metrics.ResultSuccess).Inc()
		r.event(rc, corev1.EventTypeNormal, v1alpha1.ReasonHelmUninstall, "Release %s/%s uninstalled", ns, name)
	}
	remote, err := r.remoteClient(hcfg, rc.Name)
	if err != nil {
		return err
	}
	return r.deleteInstalledNamespace(ctx, remote, rc.Name, ns)
}

// deleteInstalledNamespace deletes ns if clustershard created it.
func (r *Reconciler) deleteInstalledNamespace(ctx context.Context, remote client.Client, cluster, ns string) error {
	var n corev1.Namespace
	if err := remote.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
		return client.IgnoreNotFound(err)
	}
	if n.Labels[v1alpha1.InstalledByLabel] == "" || !n.DeletionTimestamp.IsZero() {
		return nil
	}
	return client.IgnoreNotFound(r.owned(cluster, func() error { return remote.Delete(ctx, &n) }))
}

func (r *Reconciler) event(rc *v1alpha1.RemoteCluster, typ, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(rc, nil, typ, reason, "Install", format, args...)
	}
}
