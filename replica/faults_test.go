package replica_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remote"
	"github.com/clustershard/clustershard/registry"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/testenv"
)

func setSecret(t *testing.T, name string, content []byte) {
	t.Helper()
	if err := localcluster.WriteKubeConfigSecret(t.Context(), env.Client, testenv.ControllerNamespace, name+"-kubeconfig", "kubeconfig", content); err != nil {
		t.Fatal(err)
	}
}

func readyReason(t *testing.T, name string) string {
	c := condition(t, name, v1alpha1.ConditionReady)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

// Kubeconfig rotation restarts the manager; a corrupt one gives Ready=False
// with a clear reason and leaves the other cluster alone; fixing it recovers;
// an exec kubeconfig is refused by default.
func TestKubeconfigRotationCorruptionAndExec(t *testing.T) {
	ctx := t.Context()
	r := startReplica(t, "kc")
	remoteCluster(t, "rot", 0)
	remoteCluster(t, "steady", 1)
	waitReady(t, "rot", 60*time.Second)
	waitReady(t, "steady", 60*time.Second)
	before, _ := r.Registry.Get("rot")

	// Rotate: new credentials for the same remote.
	_, rotated, err := env.Remotes[0].AddUser("rotated-user", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	setSecret(t, "rot", rotated)
	eventually(t, 30*time.Second, "restart on rotation", func() bool {
		info, ok := r.Registry.Get("rot")
		var rc v1alpha1.RemoteCluster
		_ = env.Client.Get(ctx, client.ObjectKey{Name: "rot"}, &rc)
		return ok && info.State == registry.StateRunning && info.Spawned.After(before.Spawned) && rc.Status.KubeConfigHash == remote.Hash(rotated)
	})
	ensureNamespace(t, env.Client, "kc")
	if err := env.Client.Create(ctx, source("kc", "after-rotation", "rot")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "sync after rotation", func() bool {
		_, err := copyOf(t, 0, "kc", "after-rotation")
		return err == nil
	})

	// Corrupt.
	setSecret(t, "rot", []byte("apiVersion: v1\nkind: Config\nclusters: [ {{{ not yaml"))
	eventually(t, 30*time.Second, "Ready=False for a corrupt kubeconfig", func() bool {
		return readyReason(t, "rot") == "False/"+v1alpha1.ReasonKubeConfigMalformed
	})
	if _, ok := r.Registry.Get("rot"); ok {
		t.Fatal("the manager of a cluster with a corrupt kubeconfig still runs")
	}
	if readyReason(t, "steady") != "True/ManagerRunning" {
		t.Fatalf("the other cluster was affected: %s", readyReason(t, "steady"))
	}
	var events corev1.EventList
	_ = env.Client.List(ctx, &events, client.InNamespace("default"))
	for _, e := range events.Items {
		if strings.Contains(e.Message, "not yaml") {
			t.Fatalf("secret content in an event: %q", e.Message)
		}
	}

	// Fix.
	setSecret(t, "rot", env.Remotes[0].KubeConfig)
	waitReady(t, "rot", 30*time.Second)

	// Exec credentials are refused by default.
	exec := strings.Replace(string(env.Remotes[0].KubeConfig), "users:", "users:\n- name: exec-user\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/true\n      interactiveMode: Never\nusers-old:", 1)
	exec = strings.Replace(exec, "user: remote-0", "user: exec-user", 1)
	if !strings.Contains(exec, "user: exec-user") {
		t.Fatalf("could not build an exec kubeconfig from:\n%s", env.Remotes[0].KubeConfig)
	}
	setSecret(t, "rot", []byte(exec))
	eventually(t, 30*time.Second, "exec kubeconfig refused", func() bool {
		return readyReason(t, "rot") == "False/"+v1alpha1.ReasonKubeConfigExecNotAllowed
	})
}

// A remote API server that goes away: Connected=False within the probe
// bound, its sources get RemoteSynced=False, the other cluster keeps
// syncing; when it comes back everything recovers by itself.
func TestRemoteDownAndBack(t *testing.T) {
	ctx := t.Context()
	startReplica(t, "health")
	remoteCluster(t, "fragile", 1)
	remoteCluster(t, "sturdy", 0)
	waitReady(t, "fragile", 60*time.Second)
	waitReady(t, "sturdy", 60*time.Second)
	ensureNamespace(t, env.Client, "health")

	remote := env.Remotes[1]
	if err := remote.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	back := false
	t.Cleanup(func() {
		if !back {
			_ = remote.StartAPIServer()
		}
	})
	downAt := time.Now()
	eventually(t, 15*time.Second, "Connected=False", func() bool {
		c := condition(t, "fragile", v1alpha1.ConditionConnected)
		return c != nil && c.Status == metav1.ConditionFalse
	})
	t.Logf("Connected=False %v after the remote API server died", time.Since(downAt).Round(100*time.Millisecond))
	if err := env.Client.Create(ctx, source("health", "to-fragile", "fragile")); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, source("health", "to-sturdy", "sturdy")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "RemoteSynced=False on the unreachable cluster's source", func() bool {
		var s examplev1alpha1.ExampleChaos
		if env.Client.Get(ctx, client.ObjectKey{Namespace: "health", Name: "to-fragile"}, &s) != nil {
			return false
		}
		c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionRemoteSynced)
		return c != nil && c.Status == metav1.ConditionFalse
	})
	eventually(t, 30*time.Second, "the healthy cluster keeps syncing", func() bool {
		_, err := copyOf(t, 0, "health", "to-sturdy")
		return err == nil
	})

	if err := remote.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	back = true
	waitReady(t, "fragile", 60*time.Second)
	eventually(t, 60*time.Second, "the recovered cluster syncs", func() bool {
		_, err := copyOf(t, 1, "health", "to-fragile")
		return err == nil
	})
}

// A restarted replica (new managers, same API servers) re-spawns everything
// and syncs with no duplicates and no orphans.
func TestReplicaRestart(t *testing.T) {
	ctx := t.Context()
	first := startReplica(t, "phoenix")
	remoteCluster(t, "again", 0)
	waitReady(t, "again", 60*time.Second)
	ensureNamespace(t, env.Client, "restart")
	for i := range 5 {
		if err := env.Client.Create(ctx, source("restart", objName("r", i), "again")); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "copies", func() bool {
		_, err := copyOf(t, 0, "restart", objName("r", 4))
		return err == nil
	})
	first.stop()
	second := startReplica(t, "phoenix")
	eventually(t, 60*time.Second, "re-spawned", func() bool {
		info, ok := second.Registry.Get("again")
		return ok && info.State == registry.StateRunning
	})
	if err := env.Client.Create(ctx, source("restart", "after-restart", "again")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "sync after restart", func() bool {
		_, err := copyOf(t, 0, "restart", "after-restart")
		return err == nil
	})
	var copies examplev1alpha1.ExampleChaosList
	if err := env.RemoteClients[0].List(ctx, &copies, client.InNamespace("restart")); err != nil {
		t.Fatal(err)
	}
	if len(copies.Items) != 6 {
		t.Fatalf("%d copies in the remote, want 6 (no duplicates, no orphans)", len(copies.Items))
	}
}

// Two replicas share the clusters: every copy is written by its cluster's owner.
func TestTwoReplicasWriteOnlyWhatTheyOwn(t *testing.T) {
	ctx := t.Context()
	a, b := startReplica(t, "left"), startReplica(t, "right")
	names := []string{"two-a", "two-b", "two-c", "two-d"}
	for i, n := range names {
		remoteCluster(t, n, i%2, "two-"+n)
	}
	for _, n := range names {
		waitReady(t, n, 60*time.Second)
	}
	owners := map[string]string{}
	for _, n := range names {
		var rc v1alpha1.RemoteCluster
		if err := env.Client.Get(ctx, client.ObjectKey{Name: n}, &rc); err != nil {
			t.Fatal(err)
		}
		owners[n] = rc.Status.Owner
		var other *running
		switch rc.Status.Owner {
		case "left":
			other = b
		case "right":
			other = a
		default:
			t.Fatalf("%s owned by %q", n, rc.Status.Owner)
		}
		if _, ok := other.Registry.Get(n); ok {
			t.Fatalf("%s runs on both replicas", n)
		}
		ns := "two-" + n
		ensureNamespace(t, env.Client, ns)
		for i := range 5 {
			if err := env.Client.Create(ctx, source(ns, objName("o", i), n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, n := range names {
		eventually(t, 60*time.Second, "copies of "+n, func() bool {
			for j := range 5 {
				c, err := copyOf(t, i%2, "two-"+n, objName("o", j))
				if err != nil || c.Annotations[v1alpha1.WrittenByAnnotation] != owners[n] {
					return false
				}
			}
			return true
		})
	}

	// Hand-over: "left" shuts down; "right" re-spawns its clusters (not gated
	// on observedGeneration) and keeps syncing them.
	a.stop()
	for i, n := range names {
		eventually(t, 30*time.Second, n+" owned and Ready on right", func() bool {
			var rc v1alpha1.RemoteCluster
			if env.Client.Get(ctx, client.ObjectKey{Name: n}, &rc) != nil {
				return false
			}
			ready := meta.IsStatusConditionTrue(rc.Status.Conditions, v1alpha1.ConditionReady)
			return rc.Status.Owner == "right" && ready && rc.Status.LastHandoverTime != nil
		})
		if err := env.Client.Create(ctx, source("two-"+n, "after-handover", n)); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "sync after hand-over for "+n, func() bool {
			c, err := copyOf(t, i%2, "two-"+n, "after-handover")
			return err == nil && c.Annotations[v1alpha1.WrittenByAnnotation] == "right"
		})
	}
}
