package remotecopy_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotecopy"
)

func TestParseKind(t *testing.T) {
	k, err := remotecopy.ParseKind("ExampleChaos.v1alpha1.example.clustershard.io")
	if err != nil {
		t.Fatal(err)
	}
	if k.GVK.Kind != "ExampleChaos" || k.GVK.Group != "example.clustershard.io" || k.CRD != "examplechaos.example.clustershard.io" || len(k.Field) != 2 {
		t.Fatalf("parsed %+v", k)
	}
	k, err = remotecopy.ParseKind("PodChaos.v1alpha1.chaos-mesh.org/podchaos:spec.target.cluster")
	if err != nil || k.CRD != "podchaos.chaos-mesh.org" || len(k.Field) != 3 {
		t.Fatalf("parsed %+v, %v", k, err)
	}
	if k.UpdateStrategy() != remotecopy.UpdateAuto {
		t.Fatalf("default update strategy %q, want Auto", k.UpdateStrategy())
	}
	k, err = remotecopy.ParseKind("PodChaos.v1alpha1.chaos-mesh.org/podchaos:spec.remoteCluster@recreate")
	if err != nil || k.UpdateStrategy() != remotecopy.UpdateRecreate || k.CRD != "podchaos.chaos-mesh.org" || len(k.Field) != 2 {
		t.Fatalf("parsed %+v, %v", k, err)
	}
	if k, err = remotecopy.ParseKind("ExampleChaos.v1alpha1.example.clustershard.io@Apply"); err != nil || k.UpdateStrategy() != remotecopy.UpdateApply {
		t.Fatalf("parsed %+v, %v", k, err)
	}
	for _, bad := range []string{"", "Kind", "Kind.v1", "Kind..g", "K.v.g:spec..x", "K.v.g@", "K.v.g@Replace"} {
		if _, err := remotecopy.ParseKind(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCopy(t *testing.T) {
	k, _ := remotecopy.ParseKind("ExampleChaos.v1alpha1.example.clustershard.io")
	src := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.clustershard.io/v1alpha1", "kind": "ExampleChaos",
		"metadata": map[string]any{
			"namespace": "ns", "name": "n", "uid": "u-1", "resourceVersion": "7",
			"finalizers":  []any{"clustershard.io/replicate"},
			"labels":      map[string]any{"app": "x", "clustershard.io/other": "y"},
			"annotations": map[string]any{"note": "keep", "clustershard.io/replicated-to": "east"},
		},
		"spec":   map[string]any{"remoteCluster": "east", "action": "pod-kill"},
		"status": map[string]any{"phase": "Running"},
	}}
	c := k.Copy(src, "east", "replica-1")
	if _, found, _ := unstructured.NestedString(c.Object, "spec", "remoteCluster"); found {
		t.Fatal("remote-cluster field not cleared")
	}
	if a, _, _ := unstructured.NestedString(c.Object, "spec", "action"); a != "pod-kill" {
		t.Fatal("spec not copied")
	}
	if _, found := c.Object["status"]; found {
		t.Fatal("status copied")
	}
	if c.GetResourceVersion() != "" || c.GetUID() != "" || len(c.GetFinalizers()) != 0 {
		t.Fatal("server metadata copied")
	}
	l, a := c.GetLabels(), c.GetAnnotations()
	if l["app"] != "x" || l["clustershard.io/other"] != "" || l[v1alpha1.CopyClusterLabel] != "east" || l[v1alpha1.ControlledByLabel] != v1alpha1.ControlledByValue {
		t.Fatalf("labels %v", l)
	}
	if a["note"] != "keep" || a[v1alpha1.ReplicatedToAnnotation] != "" || a[v1alpha1.WrittenByAnnotation] != "replica-1" || a[v1alpha1.SourceUIDAnnotation] != "u-1" {
		t.Fatalf("annotations %v", a)
	}
	if src.Object["spec"].(map[string]any)["remoteCluster"] != "east" {
		t.Fatal("the source was modified")
	}
}

func TestSkipRemoteBound(t *testing.T) {
	p := remotecopy.SkipRemoteBound()
	local := &examplev1alpha1.ExampleChaos{ObjectMeta: metav1.ObjectMeta{Name: "l"}}
	remote := local.DeepCopy()
	remote.Spec.RemoteCluster = "east"
	if !p.Create(event.CreateEvent{Object: local}) || p.Create(event.CreateEvent{Object: remote}) {
		t.Fatal("typed objects: wrong decision")
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"remoteCluster": "east"}}}
	if p.Create(event.CreateEvent{Object: u}) {
		t.Fatal("unstructured remote-bound object passed")
	}
}
