package registry_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/clustershard/clustershard/registry"
)

// eventLog collects the registry's state changes.
type eventLog struct {
	mu     sync.Mutex
	events []registry.Event
}

func (l *eventLog) add(e registry.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) has(cluster string, s registry.State) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if e.Cluster == cluster && e.State == s {
			return true
		}
	}
	return false
}

// A remote API server stopped under a running manager: the entry is reported,
// other clusters keep working, the process lives, Stop returns within its
// context; when the server returns the entry recovers without a restart.
func TestRemoteDownIsReportedAndIsolated(t *testing.T) {
	ctx := t.Context()
	events := &eventLog{}
	r := newRegistry(t, &seen{}, func(o *registry.Options) { o.OnEvent = events.add })
	if err := r.Spawn("up", env.Remotes[0].Config); err != nil {
		t.Fatal(err)
	}
	if err := r.Spawn("down", env.Remotes[1].Config); err != nil {
		t.Fatal(err)
	}
	if err := r.Spawn("down-then-stopped", env.Remotes[1].Config); err != nil {
		t.Fatal(err)
	}
	remote := env.Remotes[1]
	if err := remote.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = remote.StartAPIServer()
		}
	})

	eventually(t, 30*time.Second, "the down cluster reported Unhealthy", func() bool {
		return events.has("down", registry.StateUnhealthy)
	})
	info, _ := r.Get("down")
	if info.State != registry.StateUnhealthy || info.Err == nil {
		t.Fatalf("down: state %s, err %v", info.State, info.Err)
	}
	if err := r.WithClient("up", func(c client.Client) error {
		return c.Create(ctx, configMap("default", "while-other-down", nil))
	}); err != nil {
		t.Fatalf("a healthy cluster stopped working while another was down: %v", err)
	}
	if up, _ := r.Get("up"); up.State != registry.StateRunning {
		t.Fatalf("up: state %s", up.State)
	}

	stopCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	start := time.Now()
	err := r.Stop(stopCtx, "down-then-stopped")
	if stopCtx.Err() != nil {
		t.Fatalf("Stop of an unreachable cluster overran its context (%v): %v", time.Since(start), err)
	}
	if err != nil {
		t.Fatalf("Stop of an unreachable cluster: %v", err)
	}

	if err := remote.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	eventually(t, 30*time.Second, "the down cluster running again", func() bool {
		info, _ := r.Get("down")
		return info.State == registry.StateRunning
	})
	if err := r.WithClient("down", func(c client.Client) error { return c.List(ctx, &corev1.ConfigMapList{}) }); err != nil {
		t.Fatalf("the recovered cluster does not answer: %v", err)
	}
}

// 50 Spawn/Stop cycles of one name: no controller-name collision, no goroutine left.
func TestSpawnStopCyclesLeaveNothingBehind(t *testing.T) {
	ctx := t.Context()
	r := newRegistry(t, &seen{})
	cycle := func() {
		t.Helper()
		if err := r.Spawn("cycled", env.Remotes[0].Config, registry.WithNamespaces("default")); err != nil {
			t.Fatalf("spawn: %v", err)
		}
		if err := r.WithClient("cycled", func(c client.Client) error {
			return c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("default"))
		}); err != nil {
			t.Fatalf("with client: %v", err)
		}
		if err := r.Stop(ctx, "cycled"); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	cycle() // warm the shared transports and process-wide singletons
	opts := []goleak.Option{
		goleak.IgnoreCurrent(),
		// client-go keeps pooled HTTP/2 connections per TLS config alive across
		// managers; they are shared, not per spawn.
		goleak.IgnoreTopFunction("net/http.(*http2ClientConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		// controller-runtime v0.25 never ends this goroutine when a
		// namespace-restricted manager stops before an event handler's
		// initial sync; Stop waits up to a second for the sync to make it
		// rare, but under the race detector on 2 cores it still happens.
		goleak.IgnoreTopFunction("sigs.k8s.io/controller-runtime/pkg/cache.newMultiNamespaceInformerHandlerRegistration.func1"),
	}
	for range 50 {
		cycle()
	}
	if _, ok := r.Get("cycled"); ok {
		t.Fatal("entry left after Stop")
	}
	goleak.VerifyNone(t, opts...)
}

// A namespace-restricted manager cannot read outside its namespaces.
func TestNamespaceRestrictedCache(t *testing.T) {
	ctx := t.Context()
	r := newRegistry(t, &seen{})
	if err := r.Spawn("scoped", env.Remotes[0].Config, registry.WithNamespaces("default")); err != nil {
		t.Fatal(err)
	}
	err := r.WithClient("scoped", func(c client.Client) error {
		if err := c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("default")); err != nil {
			return err
		}
		return c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("kube-system"))
	})
	if err == nil {
		t.Fatal("a manager scoped to namespace default listed kube-system")
	}
	if errors.Is(err, registry.ErrNotExist) {
		t.Fatalf("unexpected error: %v", err)
	}
}

// runnableModule adds, for cluster name only, a runnable that fails after start
// (or, with slowStop, one that takes that long to stop).
func runnableModule(name string, run func(ctx context.Context) error) fx.Option {
	return fx.Invoke(func(p moduleParams) error {
		if p.ClusterName != name {
			return nil
		}
		return p.Manager.Add(manager.RunnableFunc(run))
	})
}

// A manager that exits with an error marks its entry Failed and is reported;
// the process and the other clusters carry on; Stop then Spawn restarts it.
func TestManagerFailureIsReported(t *testing.T) {
	ctx := t.Context()
	events := &eventLog{}
	var fail atomic.Bool
	fail.Store(true)
	r := newRegistry(t, &seen{}, func(o *registry.Options) {
		o.OnEvent = events.add
		o.RemoteModules = append(o.RemoteModules, runnableModule("doomed", func(ctx context.Context) error {
			if fail.Load() {
				return errors.New("boom")
			}
			<-ctx.Done()
			return nil
		}))
	})
	if err := r.Spawn("fine", env.Remotes[0].Config); err != nil {
		t.Fatal(err)
	}
	_ = r.Spawn("doomed", env.Remotes[0].Config) // may fail while starting or just after
	eventually(t, 30*time.Second, "doomed reported Failed", func() bool {
		info, ok := r.Get("doomed")
		return !ok || (info.State == registry.StateFailed && events.has("doomed", registry.StateFailed))
	})
	if info, ok := r.Get("doomed"); ok {
		if err := r.WithClient("doomed", func(client.Client) error { return nil }); !errors.Is(err, registry.ErrNotRunning) {
			t.Fatalf("WithClient of a failed cluster: want ErrNotRunning, got %v (info %+v)", err, info)
		}
		if err := r.Stop(ctx, "doomed"); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.WithClient("fine", func(c client.Client) error { return c.List(ctx, &corev1.ConfigMapList{}) }); err != nil {
		t.Fatalf("another cluster broke: %v", err)
	}
	fail.Store(false)
	if err := r.Spawn("doomed", env.Remotes[0].Config); err != nil {
		t.Fatalf("restart after failure: %v", err)
	}
}

// The registry never runs two managers for one cluster: after a Stop that
// timed out, the old manager is still exiting, and Spawn of the same name is
// refused until it has exited.
func TestNoSecondManagerWhileTheFirstIsStillStopping(t *testing.T) {
	ctx := t.Context()
	var running, maxRunning atomic.Int32
	r := newRegistry(t, &seen{}, func(o *registry.Options) {
		o.RemoteModules = append(o.RemoteModules, runnableModule("sticky", func(ctx context.Context) error {
			n := running.Add(1)
			for {
				m := maxRunning.Load()
				if n <= m || maxRunning.CompareAndSwap(m, n) {
					break
				}
			}
			defer running.Add(-1)
			<-ctx.Done()
			time.Sleep(2 * time.Second) // a slow shutdown, within the manager's grace period
			return nil
		}))
	})
	if err := r.Spawn("sticky", env.Remotes[0].Config); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := r.Stop(short, "sticky"); err == nil {
		t.Fatal("Stop returned nil although the manager was still stopping")
	}
	if err := r.Spawn("sticky", env.Remotes[0].Config); !errors.Is(err, registry.ErrAlreadyExist) {
		t.Fatalf("Spawn while the old manager still runs: want ErrAlreadyExist, got %v", err)
	}
	eventually(t, 30*time.Second, "the old entry to leave", func() bool { _, ok := r.Get("sticky"); return !ok })
	if err := r.Spawn("sticky", env.Remotes[0].Config); err != nil {
		t.Fatal(err)
	}
	if m := maxRunning.Load(); m != 1 {
		t.Fatalf("%d managers of one cluster ran at once", m)
	}
}
