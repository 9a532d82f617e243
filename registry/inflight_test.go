package registry_test

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// holdingProxy is a loopback TCP proxy to an API server that, while held,
// keeps the bytes the client sends until released: a request "on its way".
type holdingProxy struct {
	l        net.Listener
	mu       sync.Mutex
	hold     bool
	release  chan struct{}
	got      chan struct{} // closed when bytes arrived while held
	gotOnce  sync.Once
	released time.Time // when held bytes were forwarded
}

func newHoldingProxy(t *testing.T, target string) *holdingProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdingProxy{l: l, release: make(chan struct{}), got: make(chan struct{})}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
			go p.forward(in, out)
		}
	}()
	return p
}

func (p *holdingProxy) forward(in, out net.Conn) {
	defer func() { _ = out.Close() }()
	buf := make([]byte, 32*1024)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			p.mu.Lock()
			held := p.hold
			p.mu.Unlock()
			if held {
				p.gotOnce.Do(func() { close(p.got) })
				<-p.release
				p.mu.Lock()
				if p.released.IsZero() {
					p.released = time.Now()
				}
				p.mu.Unlock()
			}
			if _, err := out.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A write in flight when its cluster is stopped is not abandoned on its way:
// Stop returns only after the remote API server received and answered it.
// (Cancelling it instead let the request reach the server after Stop, and
// so after the replica's authority had ended.)
func TestStopWaitsForWritesInFlight(t *testing.T) {
	ctx := t.Context()
	cfg := rest.CopyConfig(env.Remotes[0].Config)
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := newHoldingProxy(t, u.Host)
	cfg.Host = "https://" + p.l.Addr().String()
	r := newRegistry(t, &seen{})
	if err := r.Spawn("in-flight", cfg); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.hold = true
	p.mu.Unlock()
	wrote := make(chan error, 1)
	go func() {
		wrote <- r.WithClient("in-flight", func(c client.Client) error {
			return c.Create(ctx, configMap("default", "in-flight-write", nil))
		})
	}()
	select {
	case <-p.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the write never reached the proxy")
	}
	stopped := make(chan time.Time, 1)
	go func() {
		if err := r.Stop(ctx, "in-flight"); err != nil {
			t.Errorf("stop: %v", err)
		}
		stopped <- time.Now()
	}()
	select {
	case at := <-stopped:
		t.Fatalf("Stop returned at %v while the write was still on its way", at)
	case <-time.After(300 * time.Millisecond):
	}
	close(p.release)
	at := <-stopped
	if err := <-wrote; err != nil {
		t.Fatalf("the write in flight was not answered: %v", err)
	}
	p.mu.Lock()
	forwarded := p.released
	p.mu.Unlock()
	if !forwarded.Before(at) {
		t.Fatalf("the write reached the server at %v, after Stop returned at %v", forwarded, at)
	}
	if err := env.RemoteClients[0].Get(ctx, client.ObjectKey{Namespace: "default", Name: "in-flight-write"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the answered write is not in the remote: %v", err)
	}
}
