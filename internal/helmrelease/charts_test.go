package helmrelease

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
	"k8s.io/apimachinery/pkg/util/wait"
)

// testChart is a one-template chart at version.
func testChart(version string) *chart.Chart {
	return &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "tiny", Version: version, Type: "application"},
		Templates: []*chart.File{{Name: "templates/configmap.yaml", Data: []byte(
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  v: {{ .Chart.Version | quote }}\n")}},
	}
}

// testRepo is a Helm repository on loopback whose handler can be held; it
// counts requests per path.
type testRepo struct {
	*httptest.Server
	dir  string
	hold atomic.Pointer[chan struct{}] // requests wait while it is open
	hits sync.Map                      // path -> *atomic.Int32
}

func newTestRepo(t *testing.T, versions ...string) *testRepo {
	t.Helper()
	r := &testRepo{dir: t.TempDir()}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n, _ := r.hits.LoadOrStore(req.URL.Path, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		if h := r.hold.Load(); h != nil {
			<-*h
		}
		http.FileServer(http.Dir(r.dir)).ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	r.publish(t, versions...)
	return r
}

// publish adds chart versions and rewrites index.yaml.
func (r *testRepo) publish(t *testing.T, versions ...string) {
	t.Helper()
	for _, v := range versions {
		if _, err := chartutil.Save(testChart(v), r.dir); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := repo.IndexDirectory(r.dir, r.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(r.dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (r *testRepo) count(path string) int {
	n, ok := r.hits.Load(path)
	if !ok {
		return 0
	}
	return int(n.(*atomic.Int32).Load())
}

func newTestCharts(t *testing.T, o Options) *Charts {
	t.Helper()
	o.Dir, o.Log = t.TempDir(), logr.Discard()
	c, err := NewCharts(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(t.Context()) })
	return c
}

// waitChart polls Chart until it stops answering ErrFetching (10 s at most).
func waitChart(t *testing.T, c *Charts, r Ref) (ch *chart.Chart, err error) {
	t.Helper()
	_ = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		ch, err = c.Chart(r, nil)
		return !errors.Is(err, ErrFetching), nil
	})
	return ch, err
}

// waitVersion polls Chart until it answers the chart at version (a cached
// error or an older version is asked again until it expires), or fails.
func waitVersion(t *testing.T, c *Charts, r Ref, version string) {
	t.Helper()
	var (
		ch  *chart.Chart
		err error
	)
	if wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		ch, err = c.Chart(r, nil)
		return err == nil && ch.Metadata.Version == version, nil
	}) != nil {
		t.Fatalf("%s: want version %s, last answer %v, %v", r, version, ch, err)
	}
}

// Callers asking for a chart being fetched are not held: they get
// ErrFetching at once, one fetch serves them all, and each is notified.
func TestChartsFetchOnceInBackground(t *testing.T) {
	srv := newTestRepo(t, "0.1.0")
	hold := make(chan struct{})
	srv.hold.Store(&hold)
	c := newTestCharts(t, Options{})
	ref := Ref{Chart: srv.URL + "/tiny", Version: "0.1.0"}

	var notified sync.WaitGroup
	for range 5 {
		notified.Add(1)
		start := time.Now()
		_, err := c.Chart(ref, notified.Done)
		if !errors.Is(err, ErrFetching) {
			t.Fatalf("first callers: want ErrFetching, got %v", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a caller was held %v by the fetch", d)
		}
	}
	// Another chart (local) is served while the fetch is held.
	dir := t.TempDir()
	if _, err := chartutil.Save(testChart("9.9.9"), dir); err != nil {
		t.Fatal(err)
	}
	if ch, err := c.Chart(Ref{Chart: filepath.Join(dir, "tiny-9.9.9.tgz")}, nil); err != nil || ch.Metadata.Version != "9.9.9" {
		t.Fatalf("local chart while a fetch is held: %v", err)
	}
	srv.hold.Store(nil)
	close(hold)
	notified.Wait()
	ch, err := c.Chart(ref, nil)
	if err != nil || ch.Metadata.Version != "0.1.0" {
		t.Fatalf("after the fetch: %v", err)
	}
	if n := srv.count("/index.yaml"); n != 1 {
		t.Fatalf("index fetched %d times for 5 callers", n)
	}
	if n := srv.count("/tiny-0.1.0.tgz"); n != 1 {
		t.Fatalf("archive fetched %d times for 5 callers", n)
	}
}

// A failed fetch's error is answered for RetryAfter, then fetched again.
func TestChartsRetryAfterFailure(t *testing.T) {
	srv := newTestRepo(t, "0.1.0")
	c := newTestCharts(t, Options{RetryAfter: 300 * time.Millisecond})
	ref := Ref{Chart: srv.URL + "/tiny", Version: "0.3.0"}
	if _, err := waitChart(t, c, ref); err == nil || errors.Is(err, ErrFetching) {
		t.Fatalf("missing version: %v", err)
	}
	if _, err := c.Chart(ref, nil); err == nil || errors.Is(err, ErrFetching) {
		t.Fatalf("within RetryAfter the error is answered without a fetch: %v", err)
	}
	if n := srv.count("/index.yaml"); n != 1 {
		t.Fatalf("index fetched %d times within RetryAfter", n)
	}
	srv.publish(t, "0.3.0")
	waitVersion(t, c, ref, "0.3.0") // once RetryAfter has passed
}

// An exact version is cached for good; a constraint is resolved again after
// ResolveTTL, and a version already cached is not downloaded again.
func TestChartsCachePerVersion(t *testing.T) {
	srv := newTestRepo(t, "0.1.0")
	c := newTestCharts(t, Options{ResolveTTL: 200 * time.Millisecond})
	exact := Ref{Chart: srv.URL + "/tiny", Version: "0.1.0"}
	loose := Ref{Chart: srv.URL + "/tiny", Version: "~0.1"}
	if ch, err := waitChart(t, c, exact); err != nil || ch.Metadata.Version != "0.1.0" {
		t.Fatal(err)
	}
	if ch, err := waitChart(t, c, loose); err != nil || ch.Metadata.Version != "0.1.0" {
		t.Fatal(err)
	}
	if n := srv.count("/tiny-0.1.0.tgz"); n != 1 {
		t.Fatalf("0.1.0 downloaded %d times for two references to it", n)
	}
	srv.publish(t, "0.1.1")
	waitVersion(t, c, loose, "0.1.1") // once ResolveTTL has passed
	before := srv.count("/index.yaml")
	if ch, err := c.Chart(exact, nil); err != nil || ch.Metadata.Version != "0.1.0" {
		t.Fatalf("exact version after ResolveTTL: %v", err)
	}
	if srv.count("/index.yaml") != before {
		t.Fatal("an exact version was resolved again")
	}
}

// A local chart whose version does not match is refused with both versions.
func TestLocalChartVersionMismatch(t *testing.T) {
	dir := t.TempDir()
	path, err := chartutil.Save(testChart("1.0.0"), dir)
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCharts(t, Options{})
	if _, err := c.Chart(Ref{Chart: path, Version: "2.0.0"}, nil); err == nil {
		t.Fatal("a local chart of another version was accepted")
	}
	if _, err := c.Chart(Ref{Chart: filepath.Join(dir, "missing")}, nil); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing local chart: %v", err)
	}
}
