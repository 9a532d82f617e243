package replica_test

import (
	"fmt"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remote"
	"github.com/clustershard/clustershard/registry"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/testenv"
)

// tokenKubeConfig returns a kubeconfig for remote 1 authenticating with a
// fresh token of ServiceAccount default/rotator.
func tokenKubeConfig(t *testing.T, kube kubernetes.Interface) []byte {
	t.Helper()
	tr, err := kube.CoreV1().ServiceAccounts("default").CreateToken(t.Context(), "rotator",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Remotes[1].Config)
	cfg.CertData, cfg.KeyData, cfg.BearerToken = nil, nil, tr.Status.Token
	kc, err := localcluster.KubeConfigFromREST("remote-1", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// TestCredentialRotationInPlace rotates a ServiceAccount token 8 times, each
// once the previous one is applied, while sources are created and changed, then a client certificate of the
// same user: the remote manager is never restarted, status follows every
// kubeconfig, each rotation is an event, and every source's copy is
// current. A kubeconfig for another server still restarts it.
func TestCredentialRotationInPlace(t *testing.T) {
	ctx := t.Context()
	kube, err := kubernetes.NewForConfig(env.Remotes[1].Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "rotator"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "rotator-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "default", Name: "rotator"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := startReplica(t, "rotating")
	setSecret(t, "rotating", tokenKubeConfig(t, kube))
	rc := &v1alpha1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: "rotating"}, Spec: v1alpha1.RemoteClusterSpec{
		KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyReference{Namespace: testenv.ControllerNamespace, Name: "rotating-kubeconfig", Key: "kubeconfig"}},
	}}
	if err := env.Client.Create(ctx, rc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteCluster(t, "rotating") })
	waitReady(t, "rotating", 60*time.Second)
	first, _ := r.Registry.Get("rotating")
	ensureNamespace(t, env.Client, "rot")

	// Rotate the token every second while sources are created and changed.
	var last []byte
	for i := range 8 {
		last = tokenKubeConfig(t, kube)
		setSecret(t, "rotating", last)
		src := source("rot", objName("rot", i), "rotating")
		if err := env.Client.Create(ctx, src); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			prev := source("rot", objName("rot", i-1), "rotating")
			patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"duration":"%ds"}}`, 60+i))
			if err := env.Client.Patch(ctx, prev, patch); err != nil {
				t.Fatal(err)
			}
		}
		// Each rotation lands before the next (about one a second here).
		eventually(t, 30*time.Second, "status following rotation "+fmt.Sprint(i), func() bool {
			var got v1alpha1.RemoteCluster
			_ = env.Client.Get(ctx, client.ObjectKey{Name: "rotating"}, &got)
			return got.Status.KubeConfigHash == remote.Hash(last)
		})
	}
	eventually(t, 30*time.Second, "status following the last kubeconfig", func() bool {
		var got v1alpha1.RemoteCluster
		_ = env.Client.Get(ctx, client.ObjectKey{Name: "rotating"}, &got)
		return got.Status.KubeConfigHash == remote.Hash(last)
	})
	eventually(t, 30*time.Second, "every copy current", func() bool {
		for i := range 8 {
			c, err := copyOf(t, 1, "rot", objName("rot", i))
			want := "30s"
			if i < 7 {
				want = fmt.Sprintf("%ds", 61+i)
			}
			if err != nil || c.Spec.Duration != want {
				return false
			}
		}
		return true
	})
	if now, ok := r.Registry.Get("rotating"); !ok || now.State != registry.StateRunning || !now.Spawned.Equal(first.Spawned) {
		t.Fatalf("the remote manager was restarted by token rotations: spawned %v, then %v (%v)", first.Spawned, now.Spawned, now.State)
	}
	rotations := func() int {
		var list corev1.EventList
		_ = env.Client.List(ctx, &list, client.InNamespace("default"))
		n := 0
		for _, e := range list.Items {
			if e.Reason == v1alpha1.ReasonCredentialsRotated && e.InvolvedObject.Name == "rotating" {
				n += max(int(e.Count), 1)
			}
		}
		return n
	}
	if n := rotations(); n == 0 {
		t.Fatal("no CredentialsRotated event")
	}

	// A client certificate of the same user: in place too, and the manager
	// keeps writing over new connections.
	_, certKC, err := env.Remotes[1].AddUser("system:serviceaccount:default:rotator")
	if err != nil {
		t.Fatal(err)
	}
	setSecret(t, "rotating", certKC)
	eventually(t, 30*time.Second, "status following the certificate kubeconfig", func() bool {
		var got v1alpha1.RemoteCluster
		_ = env.Client.Get(ctx, client.ObjectKey{Name: "rotating"}, &got)
		return got.Status.KubeConfigHash == remote.Hash(certKC)
	})
	if err := env.Client.Create(ctx, source("rot", "after-cert", "rotating")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a copy written after the certificate rotation", func() bool {
		_, err := copyOf(t, 1, "rot", "after-cert")
		return err == nil
	})
	if now, _ := r.Registry.Get("rotating"); !now.Spawned.Equal(first.Spawned) {
		t.Fatal("the remote manager was restarted by a certificate rotation")
	}

	// Another server (remote 0): a restart, as before.
	setSecret(t, "rotating", env.Remotes[0].KubeConfig)
	eventually(t, 30*time.Second, "a restart for another server", func() bool {
		now, ok := r.Registry.Get("rotating")
		return ok && now.State == registry.StateRunning && now.Spawned.After(first.Spawned)
	})
}
