package replica_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/helmrelease"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/replica"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/testenv"
)

func chartPath(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "charts", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func rawValues(t *testing.T, v map[string]any) *runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return &runtime.RawExtension{Raw: b}
}

// helmCluster creates a RemoteCluster for remote i whose spec.install is
// only the Helm release h (no CRDs), with cleanupPolicy Delete.
func helmCluster(t *testing.T, name string, remote int, h *v1alpha1.HelmInstall) {
	t.Helper()
	helmClusterWith(t, name, env.Remotes[remote].KubeConfig, h)
}

// helmClusterWith is helmCluster with the given remote kubeconfig.
func helmClusterWith(t *testing.T, name string, kubeconfig []byte, h *v1alpha1.HelmInstall) {
	t.Helper()
	secret := name + "-kubeconfig"
	if err := localcluster.WriteKubeConfigSecret(t.Context(), env.Client, testenv.ControllerNamespace, secret, "kubeconfig", kubeconfig); err != nil {
		t.Fatal(err)
	}
	no := false
	rc := &v1alpha1.RemoteCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.RemoteClusterSpec{
			KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyReference{Namespace: testenv.ControllerNamespace, Name: secret, Key: "kubeconfig"}},
			Install:    &v1alpha1.InstallSpec{CRDs: &no, Helm: h, CleanupPolicy: v1alpha1.CleanupDelete},
		},
	}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteCluster(t, name) })
}

func getCluster(t *testing.T, name string) *v1alpha1.RemoteCluster {
	t.Helper()
	var rc v1alpha1.RemoteCluster
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, &rc); err != nil {
		t.Fatal(err)
	}
	return &rc
}

// editHelm changes spec.install.helm of a RemoteCluster.
func editHelm(t *testing.T, name string, edit func(*v1alpha1.HelmInstall)) {
	t.Helper()
	rc := getCluster(t, name)
	before := rc.DeepCopy()
	edit(rc.Spec.Install.Helm)
	if err := env.Client.Patch(t.Context(), rc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

// history reads the release's revisions straight from the remote cluster.
func history(t *testing.T, remote int, ns, name string) []*release.Release {
	t.Helper()
	hc, err := helmrelease.NewClient(env.Remotes[remote].Config, ns, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	h, err := hc.History(name)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// installedWith waits until Installed is True for the current generation and
// status.helm shows revision.
func installedWith(t *testing.T, name string, revision int) *v1alpha1.RemoteCluster {
	t.Helper()
	var rc *v1alpha1.RemoteCluster
	eventually(t, 60*time.Second, name+" installed at revision", func() bool {
		rc = getCluster(t, name)
		c := condition(t, name, v1alpha1.ConditionInstalled)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == rc.Generation &&
			rc.Status.Helm != nil && rc.Status.Helm.Revision == revision && rc.Status.Helm.Status == "deployed"
	})
	return rc
}

// helmOps reads the process-wide Helm operation counter.
func helmOps(op, result string) float64 {
	return testutil.ToFloat64(metrics.HelmOperations.WithLabelValues(op, result))
}

func configMapData(t *testing.T, remote int, ns, name string) (map[string]string, error) {
	t.Helper()
	var cm corev1.ConfigMap
	err := env.RemoteClients[remote].Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &cm)
	return cm.Data, err
}

// Acceptance of spec.install.helm with a chart kept in test data: install →
// objects present, Installed=True with the revision; a change of values →
// exactly one upgrade; the same spec again, and a restart of the replica (a
// fresh spawn) → no new revision; deletion → release uninstalled, its
// namespace removed, finalizer removed.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	ctx := t.Context()
	installs, upgrades, uninstalls := helmOps(metrics.HelmInstall, metrics.ResultSuccess), helmOps(metrics.HelmUpgrade, metrics.ResultSuccess), helmOps(metrics.HelmUninstall, metrics.ResultSuccess)
	r := startReplica(t, "helmsman")
	const ns, rel = "tiny-system", "tiny"
	helmCluster(t, "helm-east", 0, &v1alpha1.HelmInstall{
		Chart: chartPath(t, "tiny"), Version: "0.1.0", ReleaseName: rel, Namespace: ns,
		Values: rawValues(t, map[string]any{"greeting": "hello"}),
	})
	waitReady(t, "helm-east", 60*time.Second)
	rc := installedWith(t, "helm-east", 1)
	if h := rc.Status.Helm; h.Chart != "tiny" || h.Version != "0.1.0" || h.AppVersion != "1.0" || h.ReleaseName != rel || h.Namespace != ns || h.LastDeployed == nil || h.ValuesHash == "" {
		t.Fatalf("status.helm = %+v", h)
	}
	if c := condition(t, "helm-east", v1alpha1.ConditionInstalled); !strings.Contains(c.Message, "revision 1") {
		t.Fatalf("Installed message %q does not name the revision", c.Message)
	}
	data, err := configMapData(t, 0, ns, rel+"-config")
	if err != nil || data["greeting"] != "hello" {
		t.Fatalf("ConfigMap of the release: %v %v", data, err)
	}
	if err := env.RemoteClients[0].Get(ctx, client.ObjectKey{Namespace: ns, Name: rel}, &corev1.Service{}); err != nil {
		t.Fatalf("Service of the release: %v", err)
	}
	var n corev1.Namespace
	if err := env.RemoteClients[0].Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil || n.Labels[v1alpha1.InstalledByLabel] == "" {
		t.Fatalf("release namespace not created with the installed label: %v %v", n.Labels, err)
	}

	// New values: exactly one upgrade.
	editHelm(t, "helm-east", func(h *v1alpha1.HelmInstall) {
		h.Values = rawValues(t, map[string]any{"greeting": "bonjour"})
	})
	installedWith(t, "helm-east", 2)
	if data, err := configMapData(t, 0, ns, rel+"-config"); err != nil || data["greeting"] != "bonjour" {
		t.Fatalf("upgraded ConfigMap: %v %v", data, err)
	}
	if h := history(t, 0, ns, rel); len(h) != 2 || h[1].Info.Status != release.StatusDeployed || h[0].Info.Status != release.StatusSuperseded {
		t.Fatalf("history after one values change: %d revisions", len(h))
	}

	// The same spec again (an update that changes nothing in it), then a
	// restart: the release is checked at the new spawn, not upgraded.
	editHelm(t, "helm-east", func(h *v1alpha1.HelmInstall) {
		h.Values = rawValues(t, map[string]any{"greeting": "bonjour"})
	})
	r.stop()
	startReplica(t, "helmsman-2")
	eventually(t, 60*time.Second, "owned by the new replica", func() bool {
		rc := getCluster(t, "helm-east")
		c := condition(t, "helm-east", v1alpha1.ConditionReady)
		return rc.Status.Owner == "helmsman-2" && c != nil && c.Status == metav1.ConditionTrue
	})
	installedWith(t, "helm-east", 2)
	if h := history(t, 0, ns, rel); len(h) != 2 {
		t.Fatalf("the same spec made a new revision: %d revisions", len(h))
	}
	if i, u := helmOps(metrics.HelmInstall, metrics.ResultSuccess)-installs, helmOps(metrics.HelmUpgrade, metrics.ResultSuccess)-upgrades; i != 1 || u != 1 {
		t.Fatalf("clustershard_helm_operations_total: %v installs, %v upgrades; want 1 and 1", i, u)
	}

	// Deletion uninstalls the release and removes the finalizer.
	deleteCluster(t, "helm-east")
	eventually(t, 60*time.Second, "RemoteCluster gone", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: "helm-east"}, &v1alpha1.RemoteCluster{}))
	})
	if h := history(t, 0, ns, rel); len(h) != 0 {
		t.Fatalf("release still has %d revisions after deletion", len(h))
	}
	if n := helmOps(metrics.HelmUninstall, metrics.ResultSuccess) - uninstalls; n != 1 {
		t.Fatalf("clustershard_helm_operations_total: %v uninstalls, want 1", n)
	}
	if _, err := configMapData(t, 0, ns, rel+"-config"); !apierrors.IsNotFound(err) {
		t.Fatalf("the release's ConfigMap survived the uninstall: %v", err)
	}
	eventually(t, 60*time.Second, "release namespace deleted", func() bool {
		var n corev1.Namespace
		err := env.RemoteClients[0].Get(ctx, client.ObjectKey{Name: ns}, &n)
		return apierrors.IsNotFound(err) || (err == nil && !n.DeletionTimestamp.IsZero())
	})
}

// A chart whose template fails gives Installed=False with Helm's error text,
// and no manager; another cluster installing at the same time is unaffected;
// pointing the broken one at a good chart recovers it.
func TestHelmBrokenChart(t *testing.T) {
	startReplica(t, "helm-broken-replica")
	helmCluster(t, "helm-broken", 1, &v1alpha1.HelmInstall{
		Chart: chartPath(t, "broken"), ReleaseName: "broken", Namespace: "broken-system",
	})
	helmCluster(t, "helm-fine", 0, &v1alpha1.HelmInstall{
		Chart: chartPath(t, "tiny"), ReleaseName: "fine", Namespace: "fine-system",
	})
	eventually(t, 60*time.Second, "Installed=False with the template error", func() bool {
		c := condition(t, "helm-broken", v1alpha1.ConditionInstalled)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonInstallFailed &&
			strings.Contains(c.Message, "values.mustBeSet is required by the broken test chart")
	})
	if c := condition(t, "helm-broken", v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Ready of the broken cluster: %+v", c)
	}
	waitReady(t, "helm-fine", 60*time.Second)
	installedWith(t, "helm-fine", 1)
	if c := condition(t, "helm-broken", v1alpha1.ConditionInstalled); c.Status != metav1.ConditionFalse {
		t.Fatalf("broken cluster became Installed: %+v", c)
	}
	if h := history(t, 1, "broken-system", "broken"); len(h) != 0 {
		t.Fatalf("a release that did not render was stored: %d revisions", len(h))
	}

	editHelm(t, "helm-broken", func(h *v1alpha1.HelmInstall) { h.Chart = chartPath(t, "tiny") })
	waitReady(t, "helm-broken", 60*time.Second)
	installedWith(t, "helm-broken", 1)
}

// A release left pending by an operation that died mid-way (what a killed
// replica leaves) is recovered, never left stuck, and with no failed
// revision: the pending revision is removed and made again in its place
// (pending-install installed at revision 1, pending-upgrade upgraded at
// revision 2); the Installed condition and an event say what was found.
func TestHelmRecoversInterruptedReleases(t *testing.T) {
	chartDir := chartPath(t, "tiny")
	recovered := helmOps(metrics.HelmRecover, metrics.ResultSuccess)
	// An interrupted first install: revision 1 pending-install.
	stuckRelease(t, 1, "stuck-install", "stuck", []release.Status{release.StatusPendingInstall})
	// An interrupted upgrade: revision 1 deployed, revision 2 pending-upgrade.
	stuckRelease(t, 1, "stuck-upgrade", "stuck", []release.Status{release.StatusDeployed, release.StatusPendingUpgrade})

	startReplica(t, "helm-medic")
	helmCluster(t, "helm-stuck-install", 1, &v1alpha1.HelmInstall{Chart: chartDir, ReleaseName: "stuck", Namespace: "stuck-install"})
	helmCluster(t, "helm-stuck-upgrade", 1, &v1alpha1.HelmInstall{Chart: chartDir, ReleaseName: "stuck", Namespace: "stuck-upgrade"})
	waitReady(t, "helm-stuck-install", 60*time.Second)
	waitReady(t, "helm-stuck-upgrade", 60*time.Second)
	for cluster, found := range map[string]string{"helm-stuck-install": "revision 1 pending-install", "helm-stuck-upgrade": "revision 2 pending-upgrade"} {
		installed := condition(t, cluster, v1alpha1.ConditionInstalled)
		if installed == nil || !strings.Contains(installed.Message, "found "+found) {
			t.Fatalf("%s: Installed does not say it found %s: %+v", cluster, found, installed)
		}
	}
	installedWith(t, "helm-stuck-install", 1)
	installedWith(t, "helm-stuck-upgrade", 2)
	for ns, want := range map[string]string{"stuck-install": "[1:deployed]", "stuck-upgrade": "[1:superseded 2:deployed]"} {
		if got := historyString(history(t, 1, ns, "stuck")); got != want {
			t.Fatalf("%s: history %s, want %s", ns, got, want)
		}
		if data, err := configMapData(t, 1, ns, "stuck-config"); err != nil || data["greeting"] != "hello" {
			t.Fatalf("%s: ConfigMap after recovery: %v %v", ns, data, err)
		}
	}
	if n := helmOps(metrics.HelmRecover, metrics.ResultSuccess) - recovered; n != 2 {
		t.Fatalf("clustershard_helm_operations_total{operation=recover}: %v, want 2", n)
	}
}

// historyString is a release history as "[1:failed 2:deployed]".
func historyString(h []*release.Release) string {
	var parts []string
	for _, r := range h {
		parts = append(parts, fmt.Sprintf("%d:%s", r.Version, r.Info.Status))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// stuckRelease installs the tiny chart as release name in ns of remote, then
// rewrites its history with Helm's storage so that revision i has status
// statuses[i-1]: what an operation killed mid-way leaves behind.
func stuckRelease(t *testing.T, remote int, ns, name string, statuses []release.Status) {
	t.Helper()
	ensureNamespace(t, env.RemoteClients[remote], ns)
	ch, err := loader.Load(chartPath(t, "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	hc, err := helmrelease.NewClient(env.Remotes[remote].Config, ns, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	res, err := hc.Ensure(t.Context(), helmrelease.Spec{Name: name, Namespace: ns, Chart: ch})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Remotes[remote].Config)
	if err != nil {
		t.Fatal(err)
	}
	store := storage.Init(driver.NewSecrets(cs.CoreV1().Secrets(ns)))
	for i, st := range statuses {
		rel, info := *res.Release, *res.Release.Info
		rel.Info, rel.Version = &info, i+1
		rel.Info.Status = st
		if i == 0 {
			err = store.Update(&rel)
		} else {
			err = store.Create(&rel)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The periodic check repairs a release removed by hand while the manager
// runs, and leaves an intact one alone.
func TestHelmReleaseRemovedByHandIsReinstalled(t *testing.T) {
	startReplicaWith(t, "helm-repairer", func(o *replica.Options) { o.Resync = time.Second })
	helmCluster(t, "helm-repair", 0, &v1alpha1.HelmInstall{Chart: chartPath(t, "tiny"), ReleaseName: "repair", Namespace: "repair-system"})
	waitReady(t, "helm-repair", 60*time.Second)
	installedWith(t, "helm-repair", 1)
	checks := helmOps(metrics.HelmCheck, metrics.ResultSuccess)
	eventually(t, 30*time.Second, "two periodic checks", func() bool {
		return helmOps(metrics.HelmCheck, metrics.ResultSuccess)-checks >= 2
	})
	if h := history(t, 0, "repair-system", "repair"); len(h) != 1 {
		t.Fatalf("periodic checks of an intact release made %d revisions", len(h))
	}
	hc, err := helmrelease.NewClient(env.Remotes[0].Config, "repair-system", logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if gone, err := hc.Uninstall(t.Context(), "repair", time.Minute); err != nil || !gone {
		t.Fatalf("uninstall by hand: %v %v", gone, err)
	}
	eventually(t, 30*time.Second, "release reinstalled", func() bool {
		h := history(t, 0, "repair-system", "repair")
		_, err := configMapData(t, 0, "repair-system", "repair-config")
		return len(h) == 1 && h[0].Info.Status == release.StatusDeployed && err == nil
	})
}
