package replica_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/replica"
	"github.com/clustershard/clustershard/test/testenv"
)

// Deleting a RemoteCluster with cleanupPolicy Delete stops its manager,
// removes what was installed, and removes only clustershard's finalizer.
func TestRemoteClusterDeletionCleansUp(t *testing.T) {
	ctx := t.Context()
	r := startReplica(t, "cleaner")
	rc := remoteCluster(t, "doomed", 1)
	waitReady(t, "doomed", 60*time.Second)
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "doomed"}, rc); err != nil {
		t.Fatal(err)
	}
	rc.Spec.Install.CleanupPolicy = v1alpha1.CleanupDelete
	controllerutil.AddFinalizer(rc, "example.com/keep-me")
	if err := env.Client.Update(ctx, rc); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, rc); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "clustershard's finalizer removed", func() bool {
		var got v1alpha1.RemoteCluster
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "doomed"}, &got); err != nil {
			return false
		}
		return !controllerutil.ContainsFinalizer(&got, v1alpha1.RemoteClusterFinalizer) && controllerutil.ContainsFinalizer(&got, "example.com/keep-me")
	})
	if _, ok := r.Registry.Get("doomed"); ok {
		t.Fatal("the deleted cluster's manager still runs")
	}
	err := env.RemoteClients[1].Get(ctx, client.ObjectKey{Name: exampleKind.CRD}, &apiextensionsv1.CustomResourceDefinition{})
	if !apierrors.IsNotFound(err) {
		// Deletion of a CRD is asynchronous: accept one being deleted.
		var crd apiextensionsv1.CustomResourceDefinition
		if env.RemoteClients[1].Get(ctx, client.ObjectKey{Name: exampleKind.CRD}, &crd) == nil && crd.DeletionTimestamp.IsZero() {
			t.Fatal("the installed CRD was not removed")
		}
	}
	// Let the object go for the next tests.
	var got v1alpha1.RemoteCluster
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "doomed"}, &got); err == nil {
		controllerutil.RemoveFinalizer(&got, "example.com/keep-me")
		_ = env.Client.Update(ctx, &got)
	}
}

// A source naming an unknown cluster gets RemoteSynced=False ClusterNotFound
// (from the one replica the ring picks); a copy whose source is gone is
// deleted by the monitor.
func TestUnknownClusterAndOrphans(t *testing.T) {
	ctx := t.Context()
	startReplica(t, "lonely")
	remoteCluster(t, "known", 0)
	waitReady(t, "known", 60*time.Second)
	ensureNamespace(t, env.Client, "unknown")
	if err := env.Client.Create(ctx, source("unknown", "lost", "no-such-cluster")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "ClusterNotFound", func() bool {
		var s examplev1alpha1.ExampleChaos
		if env.Client.Get(ctx, client.ObjectKey{Namespace: "unknown", Name: "lost"}, &s) != nil {
			return false
		}
		c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionRemoteSynced)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonClusterNotFound
	})

	// An orphan: a labelled copy in the remote with no source.
	ensureNamespace(t, env.RemoteClients[0], "unknown")
	orphan := source("unknown", "orphan", "")
	orphan.Labels = map[string]string{v1alpha1.ControlledByLabel: v1alpha1.ControlledByValue, v1alpha1.CopyClusterLabel: "known"}
	if err := env.RemoteClients[0].Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "orphan copy deleted", func() bool {
		_, err := copyOf(t, 0, "unknown", "orphan")
		return apierrors.IsNotFound(err)
	})
}

// A source whose remote cluster is gone for good stays in deletion until an
// operator sets the release annotation.
func TestReleaseAnnotation(t *testing.T) {
	ctx := t.Context()
	startReplica(t, "releaser")
	remoteCluster(t, "ephemeral", 0)
	waitReady(t, "ephemeral", 60*time.Second)
	ensureNamespace(t, env.Client, "release")
	if err := env.Client.Create(ctx, source("release", "stuck", "ephemeral")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "copy", func() bool {
		_, err := copyOf(t, 0, "release", "stuck")
		return err == nil
	})
	deleteCluster(t, "ephemeral")
	eventually(t, 30*time.Second, "RemoteCluster gone", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: "ephemeral"}, &v1alpha1.RemoteCluster{}))
	})
	key := client.ObjectKey{Namespace: "release", Name: "stuck"}
	if err := env.Client.Delete(ctx, &examplev1alpha1.ExampleChaos{ObjectMeta: metav1.ObjectMeta{Namespace: "release", Name: "stuck"}}); err != nil {
		t.Fatal(err)
	}
	var s examplev1alpha1.ExampleChaos
	if err := env.Client.Get(ctx, key, &s); err != nil || s.DeletionTimestamp.IsZero() {
		t.Fatalf("the source was released without the annotation (err=%v)", err)
	}
	before := s.DeepCopy()
	s.Annotations[v1alpha1.ReleaseAnnotation] = "true"
	if err := env.Client.Patch(ctx, &s, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "released source gone", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &examplev1alpha1.ExampleChaos{}))
	})
}

// A RemoteCluster with cleanupPolicy Delete whose kubeconfig Secret was
// deleted first cannot be cleaned up: it is let go after CleanupTimeout,
// with a Warning event naming what was left in the remote cluster.
func TestCleanupWithoutKubeconfigFinishes(t *testing.T) {
	ctx := t.Context()
	startReplicaWith(t, "cleanup-bound", func(o *replica.Options) { o.CleanupTimeout = 3 * time.Second })
	rc := remoteCluster(t, "secretless", 1)
	waitReady(t, "secretless", 60*time.Second)
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "secretless"}, rc); err != nil {
		t.Fatal(err)
	}
	rc.Spec.Install.CleanupPolicy = v1alpha1.CleanupDelete
	if err := env.Client.Update(ctx, rc); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.ControllerNamespace, Name: "secretless-kubeconfig"}}
	if err := env.Client.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, rc); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the RemoteCluster gone without its cleanup", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: "secretless"}, &v1alpha1.RemoteCluster{}))
	})
	eventually(t, 10*time.Second, "a CleanupAbandoned event naming what was left behind", func() bool {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list); err != nil {
			return false
		}
		for _, e := range list.Items {
			if e.Regarding.Name == "secretless" && e.Reason == v1alpha1.ReasonCleanupAbandoned && strings.Contains(e.Note, "installed-by-secretless") {
				t.Logf("event: %s", e.Note)
				return true
			}
		}
		return false
	})
}
