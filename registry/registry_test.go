package registry_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/registry"
	"github.com/clustershard/clustershard/test/testenv"
)

// Each remote client writes to its own cluster, the manage-client reads the
// management cluster, and cluster-name is the name given to Spawn.
func TestClientsLandInTheRightCluster(t *testing.T) {
	ctx := t.Context()
	s := &seen{}
	r := newRegistry(t, s)
	ensureNamespace(t, env.Client, mirrorNamespace)
	names := []string{"east", "west"}
	for i, name := range names {
		if err := r.Spawn(name, env.Remotes[i].Config); err != nil {
			t.Fatalf("spawn %s: %v", name, err)
		}
	}
	for i, name := range names {
		p, n := s.last(name)
		if n != 1 || p.ClusterName != name || p.Config.Host != env.Remotes[i].Config.Host {
			t.Fatalf("%s: module got cluster-name %q, host %q (%d apps)", name, p.ClusterName, p.Config.Host, n)
		}
		// The unnamed client writes to this remote only.
		cm := configMap("default", "written-by-"+name, map[string]string{mirrorLabel: "true"})
		if err := r.WithClient(name, func(c client.Client) error { return c.Create(ctx, cm) }); err != nil {
			t.Fatalf("create through %s: %v", name, err)
		}
		if err := env.RemoteClients[i].Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err != nil {
			t.Fatalf("object written through %s is not in %s: %v", name, env.Remotes[i].Name, err)
		}
		for _, other := range []client.Client{env.Client, env.RemoteClients[1-i]} {
			if err := other.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
				t.Fatalf("object written through %s leaked into another cluster (err=%v)", name, err)
			}
		}
		// The manage-client reads the management cluster: the kubeconfig Secrets live only there.
		secret := client.ObjectKey{Namespace: testenv.ControllerNamespace, Name: testenv.SecretName(env.Remotes[i].Name)}
		if err := p.Manage.Get(ctx, secret, &corev1.Secret{}); err != nil {
			t.Fatalf("manage-client of %s cannot read the management cluster: %v", name, err)
		}
		if err := p.Remote.Get(ctx, secret, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the unnamed client of %s reads the management cluster (err=%v): clients swapped", name, err)
		}
	}
	// The remote controllers run: each mirrors its own remote's object into the
	// management cluster through manage-client, stamped with its own name and host.
	for i, name := range names {
		var out corev1.ConfigMap
		key := client.ObjectKey{Namespace: mirrorNamespace, Name: name + ".written-by-" + name}
		eventually(t, 30*time.Second, "mirror of "+name, func() bool { return env.Client.Get(ctx, key, &out) == nil })
		if out.Data["cluster"] != name || out.Data["from"] != env.Remotes[i].Config.Host {
			t.Fatalf("mirror of %s says cluster=%q from=%q", name, out.Data["cluster"], out.Data["from"])
		}
		other := client.ObjectKey{Namespace: mirrorNamespace, Name: names[1-i] + ".written-by-" + name}
		if err := env.Client.Get(ctx, other, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s's object was mirrored by the other cluster's controller", name)
		}
	}
}

func TestErrorSemantics(t *testing.T) {
	ctx := t.Context()
	s := &seen{}
	r := newRegistry(t, s)
	if err := r.Spawn("alpha", env.Remotes[0].Config); err != nil {
		t.Fatal(err)
	}
	before, _ := r.Get("alpha")
	if err := r.Spawn("alpha", env.Remotes[1].Config); !errors.Is(err, registry.ErrAlreadyExist) {
		t.Fatalf("second Spawn: want ErrAlreadyExist, got %v", err)
	}
	after, _ := r.Get("alpha")
	if _, n := s.last("alpha"); n != 1 || after.State != registry.StateRunning || !after.Spawned.Equal(before.Spawned) {
		t.Fatalf("second Spawn replaced the running manager (apps=%d, state=%s)", n, after.State)
	}
	if err := r.Stop(ctx, "nope"); !errors.Is(err, registry.ErrNotExist) {
		t.Fatalf("Stop of unknown: want ErrNotExist, got %v", err)
	}
	if err := r.WithClient("nope", func(client.Client) error { return nil }); !errors.Is(err, registry.ErrNotExist) {
		t.Fatalf("WithClient of unknown: want ErrNotExist, got %v", err)
	}

	// Stop then Spawn with a new rest.Config uses the new one.
	if err := r.Stop(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	if err := r.WithClient("alpha", func(client.Client) error { return nil }); !errors.Is(err, registry.ErrNotExist) {
		t.Fatalf("WithClient after Stop: want ErrNotExist, got %v", err)
	}
	if err := r.Spawn("alpha", env.Remotes[1].Config); err != nil {
		t.Fatalf("Spawn after Stop: %v", err)
	}
	p, n := s.last("alpha")
	if n != 2 || p.Config.Host != env.Remotes[1].Config.Host {
		t.Fatalf("re-spawn did not use the new config: host %s, apps %d", p.Config.Host, n)
	}
	cm := configMap("default", "alpha-respawned", nil)
	if err := r.WithClient("alpha", func(c client.Client) error { return c.Create(ctx, cm) }); err != nil {
		t.Fatal(err)
	}
	if err := env.RemoteClients[1].Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err != nil {
		t.Fatalf("write after re-spawn did not reach the new cluster: %v", err)
	}
	if names := r.Names(); len(names) != 1 || names[0] != "alpha" {
		t.Fatalf("Names() = %v", names)
	}
}

// A WithClient callback blocked for 10s on cluster A delays nothing on cluster B.
func TestBlockedCallbackDoesNotBlockOtherClusters(t *testing.T) {
	ctx := t.Context()
	r := newRegistry(t, &seen{})
	if err := r.Spawn("slow", env.Remotes[0].Config); err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	blocked := make(chan error, 1)
	go func() {
		blocked <- r.WithClient("slow", func(client.Client) error {
			close(entered)
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
			return nil
		})
	}()
	<-entered
	const bound = 5 * time.Second // generous: each call takes well under a second
	timed := func(what string, f func() error) {
		t.Helper()
		start := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if d := time.Since(start); d > bound {
			t.Fatalf("%s took %v while cluster slow was blocked", what, d)
		}
	}
	timed("Spawn fast", func() error { return r.Spawn("fast", env.Remotes[1].Config) })
	timed("WithClient fast", func() error {
		return r.WithClient("fast", func(c client.Client) error { return c.List(ctx, &corev1.ConfigMapList{}) })
	})
	timed("Stop fast", func() error { return r.Stop(ctx, "fast") })
	timed("Names and Get", func() error {
		if _, ok := r.Get("slow"); !ok || len(r.Names()) != 1 {
			return errors.New("registry view wrong")
		}
		return nil
	})
	select {
	case err := <-blocked:
		t.Fatalf("the blocked callback returned early: %v", err)
	default:
	}
	close(release)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
}

// Stop of a cluster cancels its in-flight callbacks' calls and waits for them;
// the callback's later calls fail; Spawn and Stop called from inside a
// callback, even Stop of the callback's own cluster, do not deadlock.
func TestStopDuringCallbackAndReentrancy(t *testing.T) {
	ctx := t.Context()
	r := newRegistry(t, &seen{})
	if err := r.Spawn("self", env.Remotes[0].Config); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- r.WithClient("self", func(c client.Client) error {
			if err := r.Spawn("inner", env.Remotes[1].Config); err != nil {
				return err
			}
			if err := r.WithClient("inner", func(ic client.Client) error { return ic.List(ctx, &corev1.ConfigMapList{}) }); err != nil {
				return err
			}
			if err := r.Stop(ctx, "inner"); err != nil {
				return err
			}
			stopCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			if err := r.Stop(stopCtx, "self"); err != nil {
				return err
			}
			// The cluster is gone: this callback's client refuses further calls.
			err := c.Create(ctx, configMap("default", "after-stop", nil))
			if !errors.Is(err, registry.ErrNotExist) {
				return errors.New("a write after Stop was not refused: " + errString(err))
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("re-entrant Spawn/Stop from a callback deadlocked")
	}
	if err := env.RemoteClients[0].Get(ctx, client.ObjectKey{Namespace: "default", Name: "after-stop"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused write reached the remote cluster (err=%v)", err)
	}
	if len(r.Names()) != 0 {
		t.Fatalf("entries left: %v", r.Names())
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// A fence that refuses writes blocks every remote write (WithClient's client,
// the manager's own client and the manage-client handed to modules) but no read.
func TestFenceRefusesWrites(t *testing.T) {
	ctx := t.Context()
	var fenced atomic.Bool
	s := &seen{}
	r := newRegistry(t, s, func(o *registry.Options) {
		o.Fence = fenceFunc(func(string) (time.Time, error) {
			if fenced.Load() {
				return time.Time{}, errors.New("membership lost")
			}
			return time.Now().Add(time.Minute), nil
		})
	})
	if err := r.Spawn("guarded", env.Remotes[0].Config); err != nil {
		t.Fatal(err)
	}
	fenced.Store(true)
	p, _ := s.last("guarded")
	cm := configMap("default", "fenced-write", nil)
	for what, c := range map[string]client.Client{"remote client": p.Remote, "manager client": p.Manager.GetClient(), "manage-client": p.Manage} {
		if err := c.Create(ctx, cm.DeepCopy()); !errors.Is(err, registry.ErrFenced) {
			t.Fatalf("%s: fenced write: want ErrFenced, got %v", what, err)
		}
	}
	if err := r.WithClient("guarded", func(c client.Client) error { return c.List(ctx, &corev1.ConfigMapList{}) }); err != nil {
		t.Fatalf("a fenced cluster's reads fail: %v", err)
	}
	if err := env.RemoteClients[0].Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a fenced write reached the remote (err=%v)", err)
	}
	// A write whose deadline has already passed is cancelled, not sent.
	fenced.Store(false)
	r2 := newRegistry(t, &seen{}, func(o *registry.Options) {
		o.Fence = fenceFunc(func(string) (time.Time, error) {
			return time.Now().Add(-time.Millisecond), nil
		})
	})
	if err := r2.Spawn("late", env.Remotes[0].Config); err != nil {
		t.Fatal(err)
	}
	late := configMap("default", "late-write", nil)
	err := r2.WithClient("late", func(c client.Client) error { return c.Create(ctx, late) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a write past the fence deadline: want DeadlineExceeded, got %v", err)
	}
	if err := env.RemoteClients[0].Get(ctx, client.ObjectKeyFromObject(late), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a write past the fence deadline reached the remote (err=%v)", err)
	}
}

type fenceFunc func(string) (time.Time, error)

func (f fenceFunc) WriteDeadline(c string) (time.Time, error) { return f(c) }

// A client made outside the registry passes the same fence.
func TestFencedClient(t *testing.T) {
	ctx := t.Context()
	var fenced atomic.Bool
	c := registry.FencedClient(env.RemoteClients[0], "outside", fenceFunc(func(string) (time.Time, error) {
		if fenced.Load() {
			return time.Time{}, errors.New("not the owner")
		}
		return time.Now().Add(time.Minute), nil
	}))
	if err := c.Create(ctx, configMap("default", "fenced-client-ok", nil)); err != nil {
		t.Fatalf("allowed write: %v", err)
	}
	fenced.Store(true)
	if err := c.Create(ctx, configMap("default", "fenced-client-refused", nil)); !errors.Is(err, registry.ErrFenced) {
		t.Fatalf("fenced write: want ErrFenced, got %v", err)
	}
	if err := c.List(ctx, &corev1.ConfigMapList{}); err != nil {
		t.Fatalf("reads are not fenced: %v", err)
	}
}
