package remotefence_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/internal/remotefence"
	"github.com/clustershard/clustershard/test/netproxy"
	"github.com/clustershard/clustershard/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{Remotes: 1}, &env))
}

// raise starts a new epoch of cluster (a new owner taking it).
func raise(t *testing.T, cfg *rest.Config, cluster string) remotefence.Epoch {
	t.Helper()
	e, err := remotefence.Raise(t.Context(), cfg, remotefence.Options{Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	if !e.Enforced {
		t.Fatalf("fence not enforced: %s: %s", e.Reason, e.Message)
	}
	return e
}

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond()
	}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func clientset(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	err := env.RemoteClients[0].Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func createConfigMap(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, metav1.CreateOptions{})
	return err
}

// Each owner raises the epoch; from then on the writes of every earlier
// owner are refused by the remote API server (create, update and delete),
// while the current owner and requests that carry no epoch pass.
func TestEpochsFenceEarlierOwners(t *testing.T) {
	const ns = "epochs"
	ensureNamespace(t, ns)
	remote := env.Remotes[0].Config
	a := raise(t, remote, "east")
	asA := clientset(t, a.Config(remote))
	if err := createConfigMap(t.Context(), asA, ns, "by-a"); err != nil {
		t.Fatalf("the owner's write: %v", err)
	}
	b := raise(t, remote, "east")
	if b.Value <= a.Value {
		t.Fatalf("epoch %d after %d, want more", b.Value, a.Value)
	}
	if err := createConfigMap(t.Context(), asA, ns, "by-a-late"); !remotefence.IsFenced(err) {
		t.Fatalf("a create of the earlier epoch: want fenced, got %v", err)
	}
	if err := asA.CoreV1().ConfigMaps(ns).Delete(t.Context(), "by-a", metav1.DeleteOptions{}); !remotefence.IsFenced(err) {
		t.Fatalf("a delete of the earlier epoch: want fenced, got %v", err)
	}
	cm, err := asA.CoreV1().ConfigMaps(ns).Get(t.Context(), "by-a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reads are not fenced: %v", err)
	}
	cm.Data = map[string]string{"late": "yes"}
	if _, err := asA.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); !remotefence.IsFenced(err) {
		t.Fatalf("an update of the earlier epoch: want fenced, got %v", err)
	}
	t.Logf("refused: %v", createConfigMap(t.Context(), asA, ns, "by-a-late"))
	if err := createConfigMap(t.Context(), clientset(t, b.Config(remote)), ns, "by-b"); err != nil {
		t.Fatalf("the new owner's write: %v", err)
	}
	if err := createConfigMap(t.Context(), clientset(t, remote), ns, "by-someone-else"); err != nil {
		t.Fatalf("a write without an epoch: %v", err)
	}
	// Another RemoteCluster on the same API server has epochs of its own:
	// raising them fences nothing of east.
	west := raise(t, remote, "west")
	raise(t, remote, "west")
	if err := createConfigMap(t.Context(), clientset(t, b.Config(remote)), ns, "by-b-after-west"); err != nil {
		t.Fatalf("east's owner after west's epochs were raised: %v", err)
	}
	if err := createConfigMap(t.Context(), clientset(t, west.Config(remote)), ns, "by-west-1"); !remotefence.IsFenced(err) {
		t.Fatalf("west's earlier epoch: want fenced, got %v", err)
	}
}

// The API server's own controllers carry no user extras at all: with the
// policy in place, a CRD created by another user is still established
// (the naming and establishing controllers write its status), and one
// created by the owner too.
func TestPolicyLeavesTheServersOwnWritesAlone(t *testing.T) {
	remote := env.Remotes[0].Config
	e := raise(t, remote, "crds")
	for _, c := range []struct {
		plural string
		cfg    *rest.Config
	}{{"byadmins", remote}, {"byowners", e.Config(remote)}} {
		cs, err := apiextensionsclient.NewForConfig(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: c.plural + ".fence.clustershard.io"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "fence.clustershard.io", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: c.plural, Kind: c.plural + "Kind"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
			},
		}
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "CRD "+crd.Name+" established with the fence policy in place", func() (bool, error) {
			got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
	}
}

// The hole the fence closes: a write sent while its writer owned the
// cluster, held on the way by a proxy that buffers, and delivered after
// another owner took over. Without an epoch it commits; with one it is
// refused on arrival.
func TestWriteHeldOnTheWayIsRefusedOnArrival(t *testing.T) {
	const ns = "held"
	ensureNamespace(t, ns)
	remote := env.Remotes[0].Config
	held := func(t *testing.T, cfg *rest.Config, name string, takeOver func()) error {
		t.Helper()
		cfg, p, err := netproxy.ForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.Close() }()
		cs := clientset(t, cfg)
		// A connection is open before the network stalls.
		if _, err := cs.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		// Held from the write's first large chunk on: its body is padded
		// above any read's headers.
		inProxy := p.HoldAtWrite(1024)
		done := make(chan error, 1)
		go func() {
			_, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Data:       map[string]string{"padding": strings.Repeat("x", 2048)},
			}, metav1.CreateOptions{})
			done <- err
		}()
		select {
		case <-inProxy:
		case err := <-done:
			t.Fatalf("the write ended before the proxy held it: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the write never reached the proxy")
		}
		takeOver()
		p.Heal()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("the held write never ended")
			return nil
		}
	}
	committed := func(name string) bool {
		err := env.RemoteClients[0].Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	t.Run("without an epoch the late write lands after the take-over", func(t *testing.T) {
		if err := held(t, remote, "unfenced", func() { raise(t, remote, "held") }); err != nil {
			t.Fatalf("want the write to land, got %v", err)
		}
		if !committed("unfenced") {
			t.Fatal("the write did not commit")
		}
	})
	t.Run("with an epoch it is refused", func(t *testing.T) {
		owner := raise(t, remote, "held")
		err := held(t, owner.Config(remote), "fenced", func() { raise(t, remote, "held") })
		if !remotefence.IsFenced(err) {
			t.Fatalf("want the late write refused by the fence, got %v", err)
		}
		if committed("fenced") {
			t.Fatal("the late write committed")
		}
		t.Logf("refused on arrival: %v", err)
	})
}

// A user who may not impersonate gets an unenforced epoch with the reason,
// and its writes (which carry no epoch) still pass.
func TestWithoutImpersonationTheFenceIsNotEnforced(t *testing.T) {
	const ns = "no-impersonation"
	ensureNamespace(t, ns)
	rc := env.RemoteClients[0]
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "all-but-impersonate"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}
	bind := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "all-but-impersonate"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "no-impersonation"}},
	}
	for _, o := range []client.Object{role, bind} {
		if err := rc.Create(t.Context(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cfg, _, err := env.Remotes[0].AddUser("limited", "no-impersonation")
	if err != nil {
		t.Fatal(err)
	}
	var e remotefence.Epoch
	// RBAC caches follow the binding.
	eventually(t, 10*time.Second, "a raise by the limited user", func() (bool, error) {
		e, err = remotefence.Raise(t.Context(), cfg, remotefence.Options{Cluster: "limited"})
		return err == nil, nil
	})
	if e.Enforced || e.Reason != remotefence.ReasonImpersonationForbidden {
		t.Fatalf("want not enforced (%s), got %+v", remotefence.ReasonImpersonationForbidden, e)
	}
	t.Logf("%s: %s", e.Reason, e.Message)
	if err := createConfigMap(t.Context(), clientset(t, e.Config(cfg)), ns, "unfenced"); err != nil {
		t.Fatalf("a write of an unfenced owner: %v", err)
	}
	// A cluster that has an epoch already is not let down to no fence:
	// earlier owners' writes that carry it would be admitted.
	raise(t, env.Remotes[0].Config, "fenced-before")
	if e, err := remotefence.Raise(t.Context(), cfg, remotefence.Options{Cluster: "fenced-before"}); err == nil {
		t.Fatalf("a cluster with an epoch fell back to no fence: %+v", e)
	} else {
		t.Logf("refused: %v", err)
	}
}

// With the epoch ConfigMap deleted, nothing is refused (not even writes
// that carry an epoch: refusing would lock every user out, since the API
// server resolves the parameter before the match conditions) until the next
// owner raises the epoch, which fences the earlier ones again.
func TestDeletedEpochLocksNobodyOutAndNeverGoesBack(t *testing.T) {
	const ns = "missing-epoch"
	ensureNamespace(t, ns)
	remote := env.Remotes[0].Config
	e := raise(t, remote, "missing")
	if err := env.RemoteClients[0].Delete(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: remotefence.Namespace, Name: remotefence.ConfigMapName}}); err != nil {
		t.Fatal(err)
	}
	asOwner := clientset(t, e.Config(remote))
	for _, cs := range []kubernetes.Interface{clientset(t, remote), asOwner} {
		// For a second, polled: the API server's parameter cache follows the
		// delete, and no write may be refused meanwhile.
		err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Second, true, func(context.Context) (bool, error) {
			// Not the poll's context: it ends at the second, mid-request.
			err := createConfigMap(t.Context(), cs, ns, "after-delete")
			_ = cs.CoreV1().ConfigMaps(ns).Delete(t.Context(), "after-delete", metav1.DeleteOptions{})
			return false, err
		})
		if !wait.Interrupted(err) {
			t.Fatalf("a write while the epoch is missing: %v", err)
		}
	}
	// The epoch never goes back: the next owner's is above the deleted
	// one, so the earlier owner is fenced again.
	again := raise(t, remote, "missing")
	if again.Value <= e.Value {
		t.Fatalf("epoch %d after the ConfigMap holding %d was deleted, want more", again.Value, e.Value)
	}
	if err := createConfigMap(t.Context(), clientset(t, again.Config(remote)), ns, "after-raise"); err != nil {
		t.Fatalf("after the epoch was raised again: %v", err)
	}
	if err := createConfigMap(t.Context(), asOwner, ns, "earlier-owner"); !remotefence.IsFenced(err) {
		t.Fatalf("the owner from before the deletion: want fenced, got %v", err)
	}
}
