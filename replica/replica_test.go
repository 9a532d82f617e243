package replica_test

import (
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
)

// One replica, two remote clusters: the RemoteClusters become Ready with the
// CRDs installed remotely; 100 sources are copied, their status mirrored back,
// spec changes propagate, a copy deleted by hand comes back, and deleting a
// source deletes its copy first.
func TestEndToEnd(t *testing.T) {
	ctx := t.Context()
	r := startReplica(t, "solo")
	remoteCluster(t, "east", 0)
	remoteCluster(t, "west", 1)
	waitReady(t, "east", 60*time.Second)
	waitReady(t, "west", 60*time.Second)
	for _, name := range []string{"east", "west"} {
		for _, typ := range []string{v1alpha1.ConditionConnected, v1alpha1.ConditionInstalled, v1alpha1.ConditionOwned} {
			if c := condition(t, name, typ); c == nil || c.Status != metav1.ConditionTrue {
				var rc v1alpha1.RemoteCluster
				_ = env.Client.Get(ctx, client.ObjectKey{Name: name}, &rc)
				t.Fatalf("%s: condition %s = %+v; status %+v", name, typ, c, rc.Status)
			}
		}
		var rc v1alpha1.RemoteCluster
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &rc); err != nil {
			t.Fatal(err)
		}
		if rc.Status.Owner != "solo" || rc.Status.KubeConfigHash == "" || rc.Status.ServerVersion == "" || rc.Status.LastHandoverTime == nil {
			t.Fatalf("%s: status %+v", name, rc.Status)
		}
	}
	for i := range env.RemoteClients {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := env.RemoteClients[i].Get(ctx, client.ObjectKey{Name: exampleKind.CRD}, &crd); err != nil {
			t.Fatalf("CRD not installed in remote %d: %v", i, err)
		}
	}

	const ns = "e2e"
	ensureNamespace(t, env.Client, ns)
	clusters := []string{"east", "west"}
	for i := range 100 {
		if err := env.Client.Create(ctx, source(ns, objName("obj", i), clusters[i%2])); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 90*time.Second, "100 copies", func() bool {
		for i := range 100 {
			c, err := copyOf(t, i%2, ns, objName("obj", i))
			if err != nil || c.Spec.RemoteCluster != "" || c.Labels[v1alpha1.CopyClusterLabel] != clusters[i%2] ||
				c.Labels["app"] != "demo" || c.Annotations[v1alpha1.WrittenByAnnotation] != "solo" {
				return false
			}
		}
		return true
	})

	// Status written on a copy appears on its source.
	c, _ := copyOf(t, 1, ns, objName("obj", 1))
	c.Status.Phase = "Injected"
	if err := env.RemoteClients[1].Status().Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "mirrored status", func() bool {
		var s examplev1alpha1.ExampleChaos
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: objName("obj", 1)}, &s) == nil && s.Status.Phase == "Injected" &&
			meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionRemoteSynced)
	})

	// A spec change propagates.
	var s examplev1alpha1.ExampleChaos
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: objName("obj", 2)}, &s); err != nil {
		t.Fatal(err)
	}
	s.Spec.Duration = "5m"
	if err := env.Client.Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "spec change", func() bool {
		c, err := copyOf(t, 0, ns, objName("obj", 2))
		return err == nil && c.Spec.Duration == "5m"
	})

	// A copy deleted by hand is re-created.
	c, _ = copyOf(t, 0, ns, objName("obj", 4))
	uid := c.UID
	if err := env.RemoteClients[0].Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "re-created copy", func() bool {
		c, err := copyOf(t, 0, ns, objName("obj", 4))
		return err == nil && c.UID != uid
	})

	// Deleting a source deletes its copy, then the source.
	if err := env.Client.Delete(ctx, &examplev1alpha1.ExampleChaos{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: objName("obj", 6)}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "copy and source gone", func() bool {
		_, cerr := copyOf(t, 0, ns, objName("obj", 6))
		serr := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: objName("obj", 6)}, &examplev1alpha1.ExampleChaos{})
		return apierrors.IsNotFound(cerr) && apierrors.IsNotFound(serr)
	})
	if names := r.Registry.Names(); len(names) != 2 {
		t.Fatalf("registry: %v", names)
	}
}
