package remotecluster

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/testenv"
)

// editedKubeConfig returns remote 0's kubeconfig changed by edit.
func editedKubeConfig(t *testing.T, edit func(*clientcmdapi.Config)) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(env.Remotes[0].KubeConfig)
	if err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A RemoteCluster whose kubeconfig cannot be had or used says why in
// Connected and Ready (False, with the reason of the problem) and in a
// Warning event, spawns no manager, and still shows it is owned here. A
// kubeconfig that cannot work until its Secret changes is a terminal error
// (no retry loop); a missing Secret or key, or an unreachable server, is
// retried.
func TestBadKubeConfigSpawnsNothing(t *testing.T) {
	noContext := editedKubeConfig(t, func(c *clientcmdapi.Config) { c.CurrentContext = "nowhere" })
	closedPort := editedKubeConfig(t, func(c *clientcmdapi.Config) {
		for _, cl := range c.Clusters {
			cl.Server = "https://127.0.0.1:1"
		}
	})
	cases := []struct {
		name, key string
		content   []byte
		reason    string
		terminal  bool
	}{
		{name: "no-secret", reason: v1alpha1.ReasonSecretNotFound},
		{name: "no-key", key: "other", content: env.Remotes[0].KubeConfig, reason: v1alpha1.ReasonSecretKeyNotFound},
		{name: "malformed", content: []byte("{this is: [not a kubeconfig"), reason: v1alpha1.ReasonKubeConfigMalformed, terminal: true},
		{name: "no-context", content: noContext, reason: v1alpha1.ReasonKubeConfigIncomplete, terminal: true},
		{name: "unreachable", content: closedPort, reason: v1alpha1.ReasonUnreachable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "bad-" + tc.name
			key := tc.key
			if key == "" {
				key = localcluster.DefaultSecretKey
			}
			remoteCluster(t, name, name+"-kubeconfig", key, tc.content)
			r, reg, rec := newReconciler(name)

			_, err := reconcileOnce(t, r, name)
			if err == nil {
				t.Fatal("Reconcile succeeded")
			}
			if terminal := errors.Is(err, reconcile.TerminalError(nil)); terminal != tc.terminal {
				t.Errorf("terminal error %v, want %v (%v)", terminal, tc.terminal, err)
			}
			for _, typ := range []string{v1alpha1.ConditionConnected, v1alpha1.ConditionReady} {
				if c := condition(t, name, typ); c.Status != metav1.ConditionFalse || c.Reason != tc.reason {
					t.Errorf("%s = %s/%s (%s), want False/%s", typ, c.Status, c.Reason, c.Message, tc.reason)
				}
			}
			if c := condition(t, name, v1alpha1.ConditionOwned); c.Status != metav1.ConditionTrue {
				t.Errorf("Owned = %+v", c)
			}
			if got := read(t, name); got.Status.Owner != identity || !controllerutil.ContainsFinalizer(got, v1alpha1.RemoteClusterFinalizer) {
				t.Errorf("owner %q, finalizers %v", got.Status.Owner, got.Finalizers)
			}
			if e := nextEvent(rec); !strings.HasPrefix(e, "Warning "+tc.reason+" ") {
				t.Errorf("event %q, want a Warning %s", e, tc.reason)
			}
			if spawns, _ := reg.counts(); spawns != 0 {
				t.Errorf("%d managers spawned", spawns)
			}
		})
	}
}

// A valid kubeconfig (remote 0's, written as the harness does) spawns one
// manager with a config pointing at that API server and carrying this
// replica's User-Agent, after the ownership epoch is raised there; status
// says Connected, Ready, Owned and the kubeconfig's hash. Another pass
// spawns nothing more. A changed kubeconfig restarts the manager. Deleting
// the RemoteCluster stops it and releases the finalizer.
func TestValidKubeConfigSpawns(t *testing.T) {
	ctx := t.Context()
	const name = "valid"
	remoteCluster(t, name, name+"-kubeconfig", localcluster.DefaultSecretKey, env.Remotes[0].KubeConfig)
	r, reg, _ := newReconciler(name)

	if res, err := reconcileOnce(t, r, name); err != nil || res.RequeueAfter == 0 {
		t.Fatalf("Reconcile = %+v, %v; want a periodic resync", res, err)
	}
	if spawns, _ := reg.counts(); spawns != 1 {
		t.Fatalf("%d managers spawned, want 1", spawns)
	}
	cfg := reg.spawns[0]
	if cfg.Host != env.Remotes[0].Config.Host || !strings.Contains(cfg.UserAgent, "cluster="+name) {
		t.Errorf("spawned with host %q, User-Agent %q; want %q and cluster=%s", cfg.Host, cfg.UserAgent, env.Remotes[0].Config.Host, name)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "default"}, &corev1.Namespace{}); err != nil {
		t.Errorf("the spawned config does not reach the remote: %v", err)
	}
	for _, typ := range []string{v1alpha1.ConditionConnected, v1alpha1.ConditionReady, v1alpha1.ConditionOwned, v1alpha1.ConditionInstalled} {
		if cond := condition(t, name, typ); cond.Status != metav1.ConditionTrue {
			t.Errorf("%s = %s/%s (%s), want True", typ, cond.Status, cond.Reason, cond.Message)
		}
	}
	if cond := condition(t, name, v1alpha1.ConditionRemoteFenced); cond.Reason == "" {
		t.Error("RemoteFenced not reported")
	} else {
		t.Logf("RemoteFenced: %s/%s", cond.Status, cond.Reason)
	}
	got := read(t, name)
	if got.Status.KubeConfigHash == "" || got.Status.ServerVersion == "" || got.Status.Owner != identity {
		t.Errorf("status %+v", got.Status)
	}

	if _, err := reconcileOnce(t, r, name); err != nil {
		t.Fatal(err)
	}
	if spawns, stops := reg.counts(); spawns != 1 || stops != 0 {
		t.Errorf("after another pass: %d spawns, %d stops; want 1, 0", spawns, stops)
	}

	rotated := append(append([]byte{}, env.Remotes[0].KubeConfig...), "\n# rotated\n"...)
	if err := localcluster.WriteKubeConfigSecret(ctx, env.Client, testenv.ControllerNamespace, name+"-kubeconfig", localcluster.DefaultSecretKey, rotated); err != nil {
		t.Fatal(err)
	}
	if _, err := reconcileOnce(t, r, name); err != nil {
		t.Fatal(err)
	}
	// The same server, CA and credentials: applied in place, no restart.
	if spawns, stops := reg.counts(); spawns != 1 || stops != 0 {
		t.Errorf("after the kubeconfig changed but not its server or credentials: %d spawns, %d stops; want 1, 0", spawns, stops)
	}
	if h := read(t, name).Status.KubeConfigHash; h == got.Status.KubeConfigHash {
		t.Error("the kubeconfig hash did not change")
	}
	// Another server address (the same API server by name): the manager
	// restarts.
	other := bytes.ReplaceAll(env.Remotes[0].KubeConfig, []byte("https://127.0.0.1:"), []byte("https://localhost:"))
	if bytes.Equal(other, env.Remotes[0].KubeConfig) {
		t.Fatalf("no 127.0.0.1 server in:\n%s", env.Remotes[0].KubeConfig)
	}
	if err := localcluster.WriteKubeConfigSecret(ctx, env.Client, testenv.ControllerNamespace, name+"-kubeconfig", localcluster.DefaultSecretKey, other); err != nil {
		t.Fatal(err)
	}
	if _, err := reconcileOnce(t, r, name); err != nil {
		t.Fatal(err)
	}
	if spawns, stops := reg.counts(); spawns != 2 || stops != 1 {
		t.Errorf("after the kubeconfig named another server: %d spawns, %d stops; want 2, 1", spawns, stops)
	}

	if err := env.Client.Delete(ctx, read(t, name)); err != nil {
		t.Fatal(err)
	}
	if _, err := reconcileOnce(t, r, name); err != nil {
		t.Fatal(err)
	}
	if _, stops := reg.counts(); stops != 2 {
		t.Errorf("%d stops after the deletion, want 2", stops)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, got); !apierrors.IsNotFound(err) {
		t.Errorf("the RemoteCluster was not released (err=%v, finalizers %v)", err, got.Finalizers)
	}
}

// A RemoteCluster this replica does not own is left to its owner: nothing
// spawned or stopped, no finalizer, no status write; it is looked at again
// on the slow resync.
func TestNotOwnedSpawnsNothing(t *testing.T) {
	const name = "not-mine"
	rc := remoteCluster(t, name, name+"-kubeconfig", localcluster.DefaultSecretKey, env.Remotes[0].KubeConfig)
	r, reg, rec := newReconciler("someone-else")

	res, err := reconcileOnce(t, r, name)
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("Reconcile = %+v, %v; want a resync", res, err)
	}
	if spawns, stops := reg.counts(); spawns != 0 || stops != 0 {
		t.Errorf("%d spawns, %d stops for a cluster owned elsewhere", spawns, stops)
	}
	if got := read(t, name); got.ResourceVersion != rc.ResourceVersion {
		t.Errorf("written: finalizers %v, status %+v", got.Finalizers, got.Status)
	}
	if e := nextEvent(rec); e != "" {
		t.Errorf("event %q", e)
	}
}

// A RemoteCluster this replica holds while its writes are fenced (a
// membership renewal answered late, within its grace) is left as it is:
// its manager keeps running, nothing is written, its epoch is remembered
// (no new raise once writable again), and it is looked at again soon.
func TestHeldWhileFencedWritesNothing(t *testing.T) {
	const name = "held-fenced"
	remoteCluster(t, name, name+"-kubeconfig", localcluster.DefaultSecretKey, env.Remotes[0].KubeConfig)
	r, reg, rec := newReconciler(name)
	if _, err := reconcileOnce(t, r, name); err != nil {
		t.Fatal(err)
	}
	for nextEvent(rec) != "" {
	}
	r.mu.Lock()
	epoch, remembered := r.epochs[name]
	r.mu.Unlock()
	if !remembered {
		t.Fatal("no epoch remembered after the spawn")
	}
	own := r.Ownership.(*fakeOwnership)
	own.owned[name], own.held = false, map[string]bool{name: true}
	before := read(t, name)

	res, err := reconcileOnce(t, r, name)
	if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > time.Second {
		t.Fatalf("Reconcile = %+v, %v; want a requeue soon", res, err)
	}
	if spawns, stops := reg.counts(); spawns != 1 || stops != 0 {
		t.Errorf("%d spawns, %d stops while held: want 1, 0", spawns, stops)
	}
	if got := read(t, name); got.ResourceVersion != before.ResourceVersion {
		t.Errorf("written while fenced: status %+v", got.Status)
	}
	if e := nextEvent(rec); e != "" {
		t.Errorf("event %q", e)
	}
	r.mu.Lock()
	after, still := r.epochs[name]
	r.mu.Unlock()
	if !still || after.Value != epoch.Value || after.Reason != epoch.Reason {
		t.Errorf("the epoch was forgotten while held (%v, %+v)", still, after)
	}
}
