package registry_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/registry"
)

// Clients built from a fenced rest.Config (as Helm builds its own) send a
// write only while the fence allows it, bounded by its deadline; reads pass.
func TestFencedConfig(t *testing.T) {
	ctx := t.Context()
	var mode atomic.Int32 // 0 owner, 1 not owner, 2 deadline passed
	cfg := registry.FencedConfig(env.Remotes[0].Config, "helm", fenceFunc(func(string) (time.Time, error) {
		switch mode.Load() {
		case 1:
			return time.Time{}, errors.New("not the owner")
		case 2:
			return time.Now().Add(-time.Second), nil
		}
		return time.Now().Add(time.Minute), nil
	}))
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm("fenced-config-ok"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("allowed write: %v", err)
	}

	mode.Store(1)
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, cm("fenced-config-refused"), metav1.CreateOptions{})
	if !errors.Is(err, registry.ErrFenced) {
		t.Fatalf("write without ownership: want ErrFenced, got %v", err)
	}
	if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "fenced-config-ok", metav1.DeleteOptions{}); !errors.Is(err, registry.ErrFenced) {
		t.Fatalf("delete without ownership: want ErrFenced, got %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "fenced-config-ok", metav1.GetOptions{}); err != nil {
		t.Fatalf("reads pass the fence: %v", err)
	}
	// Requests that store nothing pass too: a dry run, a review.
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm("fenced-config-dry"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("a dry run without ownership: %v", err)
	}
	if _, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a review without ownership: %v", err)
	}

	mode.Store(2)
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, cm("fenced-config-late"), metav1.CreateOptions{})
	if !errors.Is(err, registry.ErrFenced) {
		t.Fatalf("write past the fence deadline: want ErrFenced (not sent), got %v", err)
	}

	for _, name := range []string{"fenced-config-refused", "fenced-config-late", "fenced-config-dry"} {
		if err := env.RemoteClients[0].Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s: a fenced write reached the remote (err=%v)", name, err)
		}
	}
	if err := env.RemoteClients[0].Get(ctx, client.ObjectKey{Namespace: "default", Name: "fenced-config-ok"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("a refused delete reached the remote: %v", err)
	}
}
