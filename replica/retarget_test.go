package replica_test

import (
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/replica"
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
	startReplicaWith(t, "mover", func(o *replica.Options) { o.Kinds = []remotecopy.Kind{strictKind} })
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

// A source moved away from a cluster whose RemoteCluster was deleted meanwhile
// goes to its new cluster; the copy left behind is named in an event.
func TestRetargetFromADeletedCluster(t *testing.T) {
	ctx := t.Context()
	startReplicaWith(t, "mover-2", func(o *replica.Options) { o.Kinds = []remotecopy.Kind{strictKind} })
	remoteCluster(t, "gone-from", 0)
	remoteCluster(t, "gone-to", 1)
	waitReady(t, "gone-from", 60*time.Second)
	waitReady(t, "gone-to", 60*time.Second)
	ensureNamespace(t, env.Client, "gone-ns")
	src := &examplev1alpha1.StrictChaos{
		ObjectMeta: metav1.ObjectMeta{Namespace: "gone-ns", Name: "stranded"},
		Spec:       examplev1alpha1.StrictChaosSpec{RemoteCluster: "gone-from", Action: "pod-kill"},
	}
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the copy in gone-from", func() bool {
		_, err := strictCopyIn(t, 0, "gone-ns", "stranded")
		return err == nil
	})
	deleteCluster(t, "gone-from")
	eventually(t, 60*time.Second, "gone-from deleted", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: "gone-from"}, &v1alpha1.RemoteCluster{}))
	})
	settled(t, src)
	src.Spec.RemoteCluster = "gone-to"
	if err := env.Client.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the copy in gone-to and Synced", func() bool {
		_, err := strictCopyIn(t, 1, "gone-ns", "stranded")
		_, o, _ := strictOutcome(t, "gone-ns", "stranded")
		return err == nil && o.Reason == v1alpha1.ReasonSynced && strings.Contains(o.Message, "gone-to")
	})
	eventually(t, 10*time.Second, "a CopyLeftBehind event", func() bool {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace("gone-ns")); err != nil {
			return false
		}
		for _, e := range list.Items {
			if e.Regarding.Name == "stranded" && e.Reason == v1alpha1.ReasonCopyLeftBehind && strings.Contains(e.Note, "gone-from") {
				return true
			}
		}
		return false
	})
	// What was left behind is the user's: clean it up for the next tests.
	if cp, err := strictCopyIn(t, 0, "gone-ns", "stranded"); err == nil {
		_ = env.RemoteClients[0].Delete(ctx, cp)
	}
	if err := env.Client.Delete(ctx, src); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "source gone", func() bool {
		_, err := strictCopyIn(t, 1, "gone-ns", "stranded")
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(src), &examplev1alpha1.StrictChaos{})) && apierrors.IsNotFound(err)
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
