package registry_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/registry"
)

// The *rest.Config remote modules get, and the one the remote manager was
// built from (its event recorder, its HTTP client), pass the fence too: a
// module that builds its own client from them writes nothing once the
// cluster is not owned any more.
func TestModuleConfigIsFenced(t *testing.T) {
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
	if err := r.Spawn("own-config", env.Remotes[0].Config); err != nil {
		t.Fatal(err)
	}
	p, _ := s.last("own-config")
	fenced.Store(true)
	cm := configMap("default", "own-config-write", nil)
	_ = env.RemoteClients[0].Delete(ctx, cm.DeepCopy()) // left by an earlier run
	own, err := client.New(p.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	fromManager, err := kubernetes.NewForConfig(p.Manager.GetConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Create(ctx, cm.DeepCopy()); err == nil {
		t.Fatal("a client built from the module's *rest.Config wrote while fenced")
	}
	if _, err := fromManager.CoreV1().ConfigMaps("default").Create(ctx, cm.DeepCopy(), metav1CreateOptions()); err == nil {
		t.Fatal("a clientset built from the manager's config wrote while fenced")
	}
	if err := env.RemoteClients[0].Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a fenced write reached the remote (err=%v)", err)
	}
	// Reads still work.
	if err := own.List(ctx, &corev1.ConfigMapList{}); err != nil {
		t.Fatalf("a fenced cluster's reads fail: %v", err)
	}
}

func metav1CreateOptions() metav1.CreateOptions { return metav1.CreateOptions{} }
