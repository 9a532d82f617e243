package registry_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/clustershard/clustershard/registry"
)

// trackingFence is a Fence with a deadline a fixed time ahead that records
// what the fenced transport reports as a WriteTracker.
type trackingFence struct {
	ahead  time.Duration
	refuse atomic.Bool

	mu       sync.Mutex
	began    int
	inflight int
	unanswer int
	servers  []time.Time // until when each unanswered write may land
	issued   []time.Time // each deadline WriteDeadline gave
}

func (f *trackingFence) WriteDeadline(string) (time.Time, error) {
	if f.refuse.Load() {
		return time.Time{}, errors.New("not the owner")
	}
	d := time.Now().Add(f.ahead)
	f.mu.Lock()
	f.issued = append(f.issued, d)
	f.mu.Unlock()
	return d, nil
}

func (f *trackingFence) WriteBegan(string) func(time.Time) {
	f.mu.Lock()
	f.began++
	f.inflight++
	f.mu.Unlock()
	return func(doubtUntil time.Time) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.inflight--
		if !doubtUntil.IsZero() {
			f.unanswer++
			f.servers = append(f.servers, doubtUntil)
		}
	}
}

func (f *trackingFence) counts() (began, inflight, unanswered int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.began, f.inflight, f.unanswer
}

// The fenced transport sends the time left before the fence deadline as the
// request's server-side timeout (keeping a caller's shorter one), leaves
// reads alone, and tells a WriteTracker of each write it sent and whether
// it was answered: a write cut at the deadline, or answered 504, is in
// doubt; one whose connection was refused never reached a server.
func TestFencedTransportServerTimeout(t *testing.T) {
	ctx := t.Context()
	var mu sync.Mutex
	timeouts := map[string]string{} // by method + object name
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		if r.Method == http.MethodPost {
			var cm corev1.ConfigMap
			_ = jsonDecode(r, &cm)
			name = cm.Name
		}
		mu.Lock()
		timeouts[r.Method+" "+name] = r.URL.Query().Get("timeout")
		mu.Unlock()
		switch name {
		case "hang":
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		case "gateway":
			w.WriteHeader(http.StatusGatewayTimeout)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"default"}}`))
	}))
	defer srv.Close()

	fence := &trackingFence{ahead: 2 * time.Second}
	cs, err := kubernetes.NewForConfig(registry.FencedConfig(&rest.Config{Host: srv.URL}, "c", fence))
	if err != nil {
		t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps("default")
	create := func(name string, timeout time.Duration) error {
		req := cs.CoreV1().RESTClient().Post().Namespace("default").Resource("configmaps").
			Body(&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
		if timeout > 0 {
			req = req.Timeout(timeout)
		}
		return req.Do(ctx).Error()
	}
	sent := func(key string) time.Duration {
		t.Helper()
		mu.Lock()
		v, ok := timeouts[key]
		mu.Unlock()
		if !ok {
			t.Fatalf("%s: not received", key)
		}
		if v == "" {
			return 0
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s: timeout %q: %v", key, v, err)
		}
		return d
	}

	if err := create("plain", 0); err != nil {
		t.Fatal(err)
	}
	if d := sent("POST plain"); d <= time.Second || d > 2*time.Second {
		t.Errorf("server-side timeout %v, want the ~2 s left before the fence deadline", d)
	}
	if err := create("short", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := sent("POST short"); d != 300*time.Millisecond {
		t.Errorf("the caller's shorter timeout became %v", d)
	}
	if err := create("long", time.Minute); err != nil {
		t.Fatal(err)
	}
	if d := sent("POST long"); d <= time.Second || d > 2*time.Second {
		t.Errorf("the caller's longer timeout became %v, want it lowered to the fence's ~2 s", d)
	}
	if _, err := cms.Get(ctx, "read", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := sent("GET read"); d != 0 {
		t.Errorf("a read got a timeout of %v", d)
	}
	if began, inflight, unanswered := fence.counts(); began != 3 || inflight != 0 || unanswered != 0 {
		t.Fatalf("after three answered writes and a read: began %d, in flight %d, unanswered %d", began, inflight, unanswered)
	}

	fence.refuse.Store(true)
	if err := create("refused-by-fence", 0); !errors.Is(err, registry.ErrFenced) {
		t.Fatalf("want ErrFenced, got %v", err)
	}
	if began, inflight, unanswered := fence.counts(); began != 4 || inflight != 0 || unanswered != 0 {
		t.Fatalf("a write the fence refused is reported begun (before the check) and ended, not in doubt: began %d, in flight %d, unanswered %d", began, inflight, unanswered)
	}
	fence.refuse.Store(false)

	fence.ahead = 500 * time.Millisecond
	start := time.Now()
	err = create("hang", 0)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a write hanging past the fence deadline: want DeadlineExceeded, got %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("cut after %v, want at the 500 ms fence deadline", took)
	}
	if _, inflight, unanswered := fence.counts(); inflight != 0 || unanswered != 1 {
		t.Fatalf("a write cut at the deadline: in flight %d, unanswered %d (want 0, 1)", inflight, unanswered)
	}
	if err := create("gateway", 0); err == nil {
		t.Fatal("a 504 passed as success")
	}
	if _, _, unanswered := fence.counts(); unanswered != 2 {
		t.Fatalf("a write answered 504 is in doubt: unanswered %d, want 2", unanswered)
	}

	srv.Close() // nothing listens there now: a refused dial sends nothing
	if cs, err = kubernetes.NewForConfig(registry.FencedConfig(&rest.Config{Host: srv.URL}, "c", fence)); err != nil {
		t.Fatal(err) // a new client: no connection kept alive from before
	}
	if err := create("refused", 0); err == nil {
		t.Fatal("a write to a closed server succeeded")
	}
	if _, inflight, unanswered := fence.counts(); inflight != 0 || unanswered != 2 {
		t.Fatalf("a refused connection is not in doubt: in flight %d, unanswered %d (want 0, 2)", inflight, unanswered)
	}
}
