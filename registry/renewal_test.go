package registry_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
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

// renewingFence is a RenewingFence whose deadline is always renewDeadline
// after the last "renewal", renewed every period until it lapses; bound is
// that renewal plus boundAhead.
type renewingFence struct {
	renewDeadline, period, boundAhead time.Duration
	lapsed                            atomic.Bool

	mu   sync.Mutex
	last time.Time
	stop chan struct{}
}

func newRenewingFence(renewDeadline, period, boundAhead time.Duration) *renewingFence {
	f := &renewingFence{renewDeadline: renewDeadline, period: period, boundAhead: boundAhead, last: time.Now(), stop: make(chan struct{})}
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-t.C:
				if !f.lapsed.Load() {
					f.mu.Lock()
					f.last = time.Now()
					f.mu.Unlock()
				}
			}
		}
	}()
	return f
}

func (f *renewingFence) WriteDeadline(string) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.last.Add(f.renewDeadline)
	if !time.Now().Before(d) {
		return time.Time{}, errors.New("membership lapsed")
	}
	return d, nil
}

func (f *renewingFence) WriteBound(c string) (time.Time, error) {
	if _, err := f.WriteDeadline(c); err != nil {
		return time.Time{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last.Add(f.boundAhead), nil
}

// TestFencedTransportFollowsRenewals: with a fence whose deadline is
// renewed (1 s deadline, renewed every 250 ms), a write the server takes 2 s
// to answer, twice the renew deadline, succeeds, with a server-side timeout
// up to the fence's bound; when renewals stop mid-write it is cut once the
// last deadline passes, not at the server's answer.
func TestFencedTransportFollowsRenewals(t *testing.T) {
	ctx := t.Context()
	var timeout atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		timeout.Store(r.URL.Query().Get("timeout"))
		select {
		case <-r.Context().Done():
			return
		case <-time.After(2 * time.Second):
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"slow","namespace":"default"}}`))
	}))
	defer srv.Close()
	fence := newRenewingFence(time.Second, 250*time.Millisecond, 3*time.Second)
	defer close(fence.stop)
	cs, err := kubernetes.NewForConfig(registry.FencedConfig(&rest.Config{Host: srv.URL}, "c", fence))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: "default"}}

	start := time.Now()
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a 2 s write while the fence renews: %v", err)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Fatalf("answered in %v", took)
	}
	d, err := time.ParseDuration(timeout.Load().(string))
	if err != nil || d <= 2*time.Second || d > 3*time.Second {
		t.Fatalf("server-side timeout %q, want between 2 s and the 3 s bound", timeout.Load())
	}

	// Renewals stop 300 ms into the write: it is cut about 1 s later.
	time.AfterFunc(300*time.Millisecond, func() { fence.lapsed.Store(true) })
	start = time.Now()
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	took := time.Since(start)
	if err == nil {
		t.Fatal("a write whose fence lapsed mid-way succeeded")
	}
	if took < 900*time.Millisecond || took > 1600*time.Millisecond {
		t.Fatalf("cut after %v, want about 1.3 s (the last deadline)", took)
	}
}
