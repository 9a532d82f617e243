package replica_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// chartRepo is a Helm repository on loopback serving the tiny chart at
// versions 0.1.0 and 0.2.0 under /charts and /slow; requests under /slow
// wait until unblock. It counts requests per path.
type chartRepo struct {
	*httptest.Server
	mu      sync.Mutex
	hits    map[string]int
	gate    chan struct{}
	unblock func()
}

func newChartRepo(t *testing.T) *chartRepo {
	t.Helper()
	ch, err := loader.Load(chartPath(t, "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	r := &chartRepo{hits: map[string]int{}, gate: make(chan struct{})}
	var once sync.Once
	r.unblock = func() { once.Do(func() { close(r.gate) }) }
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.hits[req.URL.Path]++
		r.mu.Unlock()
		if strings.HasPrefix(req.URL.Path, "/slow/") {
			select {
			case <-r.gate:
			case <-req.Context().Done():
				return
			}
		}
		http.FileServer(http.Dir(root)).ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	t.Cleanup(r.unblock) // runs before Close: a blocked handler returns
	for _, dir := range []string{"charts", "slow"} {
		d := filepath.Join(root, dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"0.1.0", "0.2.0"} {
			ch.Metadata.Version = v
			if _, err := chartutil.Save(ch, d); err != nil {
				t.Fatal(err)
			}
		}
		idx, err := repo.IndexDirectory(d, r.URL+"/"+dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := idx.WriteFile(filepath.Join(d, "index.yaml"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *chartRepo) count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[path]
}

// Charts from an HTTP repository: a version is fetched once and cached; a
// new version upgrades; a constraint that resolves to the deployed version
// upgrades nothing; an unreachable repository gives Installed=False; a slow
// repository leaves its cluster ChartPending without holding another
// cluster, and the end of the fetch re-enqueues it (well before the resync).
func TestHelmChartFromRepository(t *testing.T) {
	srv := newChartRepo(t)
	startReplica(t, "helm-fetcher")

	helmCluster(t, "helm-slow", 1, &v1alpha1.HelmInstall{Chart: srv.URL + "/slow/tiny", Version: "0.1.0", ReleaseName: "slow", Namespace: "slow-system"})
	eventually(t, 30*time.Second, "helm-slow ChartPending", func() bool {
		c := condition(t, "helm-slow", v1alpha1.ConditionInstalled)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonChartPending
	})

	helmCluster(t, "helm-repo", 0, &v1alpha1.HelmInstall{Chart: srv.URL + "/charts/tiny", Version: "0.1.0", ReleaseName: "fetched", Namespace: "fetched-system"})
	helmCluster(t, "helm-unreachable", 1, &v1alpha1.HelmInstall{Chart: "http://127.0.0.1:1/charts/tiny", Version: "0.1.0", ReleaseName: "nowhere", Namespace: "nowhere-system"})
	waitReady(t, "helm-repo", 60*time.Second)
	installedWith(t, "helm-repo", 1)
	eventually(t, 60*time.Second, "Installed=False for the unreachable repository", func() bool {
		c := condition(t, "helm-unreachable", v1alpha1.ConditionInstalled)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "not a reachable chart repository")
	})
	if c := condition(t, "helm-slow", v1alpha1.ConditionInstalled); c == nil || c.Reason != v1alpha1.ReasonChartPending {
		t.Fatalf("helm-slow: %+v", c)
	}

	// A new version: one upgrade, its archive fetched once.
	editHelm(t, "helm-repo", func(h *v1alpha1.HelmInstall) { h.Version = "0.2.0" })
	rc := installedWith(t, "helm-repo", 2)
	if rc.Status.Helm.Version != "0.2.0" {
		t.Fatalf("status.helm.version = %s", rc.Status.Helm.Version)
	}
	if data, err := configMapData(t, 0, "fetched-system", "fetched-config"); err != nil || data["chartVersion"] != "0.2.0" {
		t.Fatalf("ConfigMap after the upgrade: %v %v", data, err)
	}
	// A constraint that resolves to the deployed version changes nothing.
	editHelm(t, "helm-repo", func(h *v1alpha1.HelmInstall) { h.Version = "~0.2" })
	eventually(t, 30*time.Second, "constraint observed", func() bool {
		c := condition(t, "helm-repo", v1alpha1.ConditionInstalled)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == getCluster(t, "helm-repo").Generation
	})
	if h := history(t, 0, "fetched-system", "fetched"); len(h) != 2 {
		t.Fatalf("a constraint resolving to the deployed version made a new revision: %d revisions", len(h))
	}
	for _, p := range []string{"/charts/tiny-0.1.0.tgz", "/charts/tiny-0.2.0.tgz"} {
		if n := srv.count(p); n != 1 {
			t.Fatalf("%s fetched %d times, want once (cached per version)", p, n)
		}
	}

	// The slow repository answers: the cluster installs without waiting for
	// its resync (one minute).
	srv.unblock()
	start := time.Now()
	waitReady(t, "helm-slow", 30*time.Second)
	installedWith(t, "helm-slow", 1)
	t.Logf("helm-slow installed %v after its chart arrived", time.Since(start).Round(time.Millisecond))
}
