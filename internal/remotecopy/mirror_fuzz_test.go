package remotecopy_test

import (
	"context"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotecopy"
)

// patchRecorder is a client that only records patches (MirrorStatus writes
// nothing else), through the object or through /status.
type patchRecorder struct {
	client.Client
	patches []recorded
}

type recorded struct {
	status bool
	data   []byte
}

func (p *patchRecorder) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.PatchOption) error {
	data, err := patch.Data(obj)
	p.patches = append(p.patches, recorded{data: data})
	return err
}

func (p *patchRecorder) Status() client.SubResourceWriter { return statusRecorder{p} }

type statusRecorder struct{ p *patchRecorder }

func (s statusRecorder) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
	data, err := patch.Data(obj)
	s.p.patches = append(s.p.patches, recorded{status: true, data: data})
	return err
}

func (statusRecorder) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	panic("MirrorStatus creates nothing")
}

func (statusRecorder) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	panic("MirrorStatus updates nothing")
}

func (statusRecorder) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	panic("MirrorStatus applies nothing")
}

// Any status a remote copy carries (a remote cluster's admin controls it):
// mirroring never panics, writes one patch at most, and that patch touches
// only status (and the resourceVersion of its optimistic lock), through
// /status when the kind has that subresource; the source keeps its own
// RemoteSynced condition, once.
func FuzzMirrorStatus(f *testing.F) {
	for _, s := range []string{
		`{"experiment":{"phase":"Running"},"conditions":[{"type":"AllInjected","status":"True"}]}`,
		`{"conditions":[{"type":"RemoteSynced","status":"False","reason":"Forged"}]}`,
		`{"conditions":"not a list"}`,
		`{"conditions":[1,null,"x",{"type":null}]}`,
		`{"metadata":{"name":"other"},"spec":{"x":1}}`,
		`{}`,
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, shapeBits uint8) {
		var remote map[string]any
		if err := json.Unmarshal(data, &remote); err != nil || remote == nil {
			return
		}
		shape := remotecopy.Shape{Known: true, Status: true, StatusSubresource: shapeBits&1 == 1}
		if shapeBits&2 == 2 {
			shape.ConditionFields = []string{"type", "status", "reason"} // Chaos Mesh's
		}
		k, err := remotecopy.ParseKind("PodChaos.v1alpha1.chaos-mesh.org")
		if err != nil {
			t.Fatal(err)
		}
		k = k.WithShape(shape)
		ours := map[string]any{"type": v1alpha1.ConditionRemoteSynced, "status": "True", "reason": v1alpha1.ReasonSynced}
		src := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "chaos-mesh.org/v1alpha1", "kind": "PodChaos",
			"metadata": map[string]any{"name": "p", "namespace": "ns", "resourceVersion": "7", "labels": map[string]any{"a": "b"}},
			"spec":     map[string]any{"remoteCluster": "east", "action": "pod-kill"},
			"status":   map[string]any{"conditions": []any{ours}},
		}}
		before := src.DeepCopy()
		c := &patchRecorder{}
		wrote, err := remotecopy.MirrorStatus(t.Context(), c, k, src, remote)
		if err != nil {
			t.Fatalf("mirror: %v", err)
		}
		if !wrote {
			if len(c.patches) != 0 {
				t.Fatalf("%d patches while reporting no write", len(c.patches))
			}
			return
		}
		if len(c.patches) != 1 || c.patches[0].status != shape.StatusSubresource {
			t.Fatalf("patches %+v, want one, through /status = %v", c.patches, shape.StatusSubresource)
		}
		var patch map[string]any
		if err := json.Unmarshal(c.patches[0].data, &patch); err != nil {
			t.Fatalf("patch %s: %v", c.patches[0].data, err)
		}
		for key, v := range patch {
			switch key {
			case "status":
			case "metadata":
				md, _ := v.(map[string]any)
				if len(md) != 1 || md["resourceVersion"] != "7" {
					t.Fatalf("patch writes metadata %v", v)
				}
			default:
				t.Fatalf("patch writes %q outside status: %s", key, c.patches[0].data)
			}
		}
		for _, key := range []string{"apiVersion", "kind", "metadata", "spec"} {
			if !equality.Semantic.DeepEqual(src.Object[key], before.Object[key]) {
				t.Fatalf("%s changed: %v", key, src.Object[key])
			}
		}
		conds, _, _ := unstructured.NestedSlice(src.Object, "status", "conditions")
		var mine []any
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == v1alpha1.ConditionRemoteSynced {
				mine = append(mine, m)
			}
		}
		if len(mine) != 1 || !equality.Semantic.DeepEqual(mine[0], ours) {
			t.Fatalf("RemoteSynced conditions after mirroring: %v, want only ours %v", mine, ours)
		}
	})
}
