package testenv_test

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{Remotes: 2}, &env))
}

// remoteClientFromSecret builds a client for a remote the way the controller
// will: from the kubeconfig Secret in the management cluster.
func remoteClientFromSecret(ctx context.Context, t *testing.T, remote string) client.Client {
	t.Helper()
	var secret corev1.Secret
	key := client.ObjectKey{Namespace: testenv.ControllerNamespace, Name: testenv.SecretName(remote)}
	if err := env.Client.Get(ctx, key, &secret); err != nil {
		t.Fatalf("get kubeconfig Secret of %s: %v", remote, err)
	}
	cfg, err := testenv.RESTConfigFromKubeConfig(secret.Data[localcluster.DefaultSecretKey])
	if err != nil {
		t.Fatalf("parse kubeconfig of %s: %v", remote, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatalf("client for %s: %v", remote, err)
	}
	return c
}

func TestRemotesAreSeparateClustersReadThroughSecrets(t *testing.T) {
	ctx := t.Context()
	if len(env.Remotes) != 2 {
		t.Fatalf("want 2 remotes, got %d", len(env.Remotes))
	}
	hosts := map[string]bool{env.Management.Config.Host: true}
	for i, r := range env.Remotes {
		if hosts[r.Config.Host] {
			t.Fatalf("remote %s shares an API server address %s", r.Name, r.Config.Host)
		}
		hosts[r.Config.Host] = true

		c := remoteClientFromSecret(ctx, t, r.Name)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "written-to-" + r.Name},
			Data:       map[string]string{"remote": r.Name},
		}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatalf("create in %s: %v", r.Name, err)
		}
		// The object is visible through the harness's own client of the same remote...
		if err := env.RemoteClients[i].Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err != nil {
			t.Fatalf("read back from %s: %v", r.Name, err)
		}
		// ...and nowhere else: not in the management cluster, not in the other remote.
		others := []client.Client{env.Client, env.RemoteClients[1-i]}
		for _, o := range others {
			err := o.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
			if !apierrors.IsNotFound(err) {
				t.Fatalf("object written to %s is visible elsewhere (err=%v)", r.Name, err)
			}
		}
	}
}

func TestRemoteRestartKeepsDataAndCredentials(t *testing.T) {
	ctx := t.Context()
	r := env.Remotes[1]
	c := remoteClientFromSecret(ctx, t, r.Name)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "survives-restart"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := r.StopAPIServer(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err == nil {
		t.Fatal("a stopped API server answered")
	}
	if err := r.StartAPIServer(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	// The same kubeconfig works again and the data is still there.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return c.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}) == nil, nil
	})
	if err != nil {
		t.Fatalf("object not readable after restart: %v", err)
	}
}
