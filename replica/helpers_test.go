package replica_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remote"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/replica"
	"github.com/clustershard/clustershard/shard"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/testenv"
)

var (
	exampleKind = testenv.MustKind(testenv.ExampleKind)
	// strictKind is shaped like Chaos Mesh's chaos kinds (no status
	// subresource, status.experiment required, minimal conditions).
	strictKind = testenv.MustKind(testenv.StrictKind)
)

type running struct {
	*replica.Replica
	cancel context.CancelFunc
	done   chan error
}

func logger() logr.Logger {
	if !testing.Verbose() {
		return logr.Discard()
	}
	return zap.New(zap.UseDevMode(true))
}

// startReplica runs a replica in this process until the test ends or stop.
func startReplica(t *testing.T, id string) *running {
	t.Helper()
	return startReplicaWith(t, id, nil)
}

// startReplicaWith is startReplica with edit applied to the options.
func startReplicaWith(t *testing.T, id string, edit func(*replica.Options)) *running {
	t.Helper()
	return startReplicaOn(t, id, env.Management.Config, edit)
}

// startReplicaOn is startReplicaWith against the management API server
// through cfg (a copy of env.Management.Config, say with a wrapped transport).
func startReplicaOn(t *testing.T, id string, cfg *rest.Config, edit func(*replica.Options)) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o := replicaOptions(id)
	if edit != nil {
		edit(&o)
	}
	rp, err := replica.New(ctx, cfg, o)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &running{Replica: rp, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- rp.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

// replicaOptions are the options of a test replica id.
func replicaOptions(id string) replica.Options {
	return replica.Options{
		Identity: id, Namespace: testenv.ControllerNamespace, Scheme: env.Scheme,
		Kinds:      []remotecopy.Kind{exampleKind},
		KubeConfig: remote.Options{QPS: 100, Burst: 200},
		Shard: shard.Options{
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
			StopTimeout: 5 * time.Second, Ring: shard.RingOptions{LoadFactor: 1.25},
		},
		ProbeInterval: 500 * time.Millisecond, ProbeTimeout: time.Second, ProbeFailureThreshold: 3,
		MetricsBindAddress: "0", HealthProbeBindAddress: "0", ShutdownTimeout: 20 * time.Second,
		Logger: logger().WithName(id), SeveralPerProcess: true,
	}
}

func (r *running) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		panic("replica did not stop cleanly: " + err.Error())
	}
}

// remoteCluster creates a RemoteCluster for remote i with its own Secret.
func remoteCluster(t *testing.T, name string, remote int, namespaces ...string) *v1alpha1.RemoteCluster {
	t.Helper()
	secret := name + "-kubeconfig"
	if err := localcluster.WriteKubeConfigSecret(t.Context(), env.Client, testenv.ControllerNamespace, secret, "kubeconfig", env.Remotes[remote].KubeConfig); err != nil {
		t.Fatal(err)
	}
	rc := &v1alpha1.RemoteCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.RemoteClusterSpec{
			KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyReference{Namespace: testenv.ControllerNamespace, Name: secret, Key: "kubeconfig"}},
			Install:    &v1alpha1.InstallSpec{Namespace: "installed-by-" + name},
			Namespaces: namespaces,
		},
	}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteCluster(t, name) })
	return rc
}

func deleteCluster(t *testing.T, name string) {
	rc := &v1alpha1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Delete(context.Background(), rc); client.IgnoreNotFound(err) != nil {
		t.Errorf("delete %s: %v", name, err)
	}
}

func condition(t *testing.T, name, typ string) *metav1.Condition {
	t.Helper()
	var rc v1alpha1.RemoteCluster
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, &rc); err != nil {
		return nil
	}
	return meta.FindStatusCondition(rc.Status.Conditions, typ)
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

func waitReady(t *testing.T, name string, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		c := condition(t, name, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue, nil
	})
	if err != nil {
		var rc v1alpha1.RemoteCluster
		_ = env.Client.Get(context.Background(), client.ObjectKey{Name: name}, &rc)
		t.Fatalf("timed out after %v waiting for %s Ready; its conditions: %+v", timeout, name, rc.Status.Conditions)
	}
}

func ensureNamespace(t *testing.T, c client.Client, ns string) {
	t.Helper()
	if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func source(ns, name, cluster string) *examplev1alpha1.ExampleChaos {
	return &examplev1alpha1.ExampleChaos{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "demo"}},
		Spec:       examplev1alpha1.ExampleChaosSpec{RemoteCluster: cluster, Action: "pod-kill", Duration: "30s"},
	}
}

func copyOf(t *testing.T, remote int, ns, name string) (*examplev1alpha1.ExampleChaos, error) {
	t.Helper()
	var c examplev1alpha1.ExampleChaos
	err := env.RemoteClients[remote].Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &c)
	return &c, err
}

func objName(prefix string, i int) string { return fmt.Sprintf("%s-%03d", prefix, i) }

func testenvConfig(kubeconfig []byte) (*rest.Config, error) {
	return clientcmd.RESTConfigFromKubeConfig(kubeconfig)
}
