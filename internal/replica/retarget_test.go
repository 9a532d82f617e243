package replica_test

import (
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/controllers/replication"
	"github.com/clustershard/clustershard/internal/replica"
)

func strictCopyIn(t *testing.T, remote int, ns, name string) (*examplev1alpha1.StrictChaos, error) {
	t.Helper()
	var c examplev1alpha1.StrictChaos
	err := env.RemoteClients[remote].Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &c)
	return &c, err
}

// A source whose spec.remoteCluster changes has its copy moved: the old
// cluster's copy is removed (for Chaos Mesh, a running experiment) before
// the new cluster gets one, and deleting the source afterwards leaves
// nothing in either cluster.
func TestRetargetRemovesTheOldCopy(t *testing.T) {
	ctx := t.Context()
	// StrictChaos: nothing but clustershard touches its copies, as nothing
	// but Chaos Mesh's controller touches a chaos object's.
	startReplicaWith(t, "mover", func(o *replica.Options) { o.Kinds = []replication.Kind{strictKind} })
	remoteCluster(t, "move-from", 0)
	remoteCluster(t, "move-to", 1)
	waitReady(t, "move-from", 60*time.Second)
	waitReady(t, "move-to", 60*time.Second)
	ensureNamespace(t, env.Client, "move-ns")
	src := &examplev1alpha1.StrictChaos{
		ObjectMeta: metav1.ObjectMeta{Namespace: "move-ns", Name: "wanderer"},
		Spec:       examplev1alpha1.StrictChaosSpec{RemoteCluster: "move-from", Action: "pod-kill", Duration: "30s"},
	}
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the copy in move-from", func() bool {
		_, err := strictCopyIn(t, 0, "move-ns", "wanderer")
		return err == nil
	})
	// Let the copy settle (the first status mirror and outcome writes), so
	// that nothing but the move makes anything reconcile it.
	settled(t, src)
	src.Spec.RemoteCluster = "move-to"
	if err := env.Client.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the copy in move-to and none left in move-from", func() bool {
		_, errNew := strictCopyIn(t, 1, "move-ns", "wanderer")
		_, errOld := strictCopyIn(t, 0, "move-ns", "wanderer")
		return errNew == nil && apierrors.IsNotFound(errOld)
	})
	if err := env.Client.Delete(ctx, src); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "source and copies gone", func() bool {
		_, e0 := strictCopyIn(t, 0, "move-ns", "wanderer")
		_, e1 := strictCopyIn(t, 1, "move-ns", "wanderer")
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(src), &examplev1alpha1.StrictChaos{})) &&
			apierrors.IsNotFound(e0) && apierrors.IsNotFound(e1)
	})
}

// settled waits until a source has not changed for a second, and reads it.
func settled(t *testing.T, obj client.Object) {
	t.Helper()
	rv, since := "", time.Now()
	eventually(t, 30*time.Second, "the source unchanged for a second", func() bool {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return false
		}
		if obj.GetResourceVersion() != rv {
			rv, since = obj.GetResourceVersion(), time.Now()
		}
		return time.Since(since) > time.Second
	})
}
