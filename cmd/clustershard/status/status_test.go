package status_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/cmd/clustershard/status"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/internal/scheme"
	"github.com/clustershard/clustershard/shard"
	"github.com/clustershard/clustershard/tools/fleet"
)

const ns = "clustershard-system"

func member(name, ring string, tracked string, annotations map[string]string) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: shard.MemberLeaseName(name), Annotations: annotations,
			Labels: map[string]string{v1alpha1.LeaseRoleLabel: "member", v1alpha1.RingLabel: ring, v1alpha1.TrackedLabel: tracked}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name + "@1"), AcquireTime: &now, RenewTime: &now, LeaseDurationSeconds: ptr.To(int32(15))},
	}
}

func clusterLease(cluster, holder string) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: shard.ClusterLeaseName(cluster),
			Labels:      map[string]string{v1alpha1.LeaseRoleLabel: "cluster"},
			Annotations: map[string]string{v1alpha1.ClusterAnnotation: cluster}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), AcquireTime: &now, RenewTime: &now},
	}
}

func remoteCluster(name, statusOwner, placement string) *v1alpha1.RemoteCluster {
	rc := &v1alpha1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	rc.Status.Owner, rc.Status.Placement = statusOwner, placement
	return rc
}

// TestCollectFlagsDisagreements: a replica publishing another ring than the
// Leases make, one tracking fewer Leases than name it, a status owner the
// Leases contradict and a cordoned replica all show; a fleet in agreement
// shows no warning.
func TestCollectFlagsDisagreements(t *testing.T) {
	ring := shard.RingHash([]string{"r-0", "r-1"}) // r-2 is cordoned
	objs := []client.Object{
		member("r-0", ring, "1", nil),
		member("r-1", ring, "1", nil),
		member("r-2", ring, "0", map[string]string{v1alpha1.CordonedAnnotation: "by test"}),
		clusterLease("a", "r-0@1"), clusterLease("b", "r-1@1"),
		remoteCluster("a", "r-0", ""), remoteCluster("b", "r-1", "pinned to r-1"),
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	rep, err := status.Collect(t.Context(), c, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Warnings) != 0 || rep.Ring != ring || rep.Unowned != 0 {
		t.Fatalf("a fleet in agreement: ring %q (want %q), unowned %d, warnings %v", rep.Ring, ring, rep.Unowned, rep.Warnings)
	}
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cordoned (by test)", "pinned to r-1"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}

	// Disagreements.
	objs = []client.Object{
		member("r-0", ring, "1", nil),
		member("r-1", shard.RingHash([]string{"r-1"}), "0", nil), // another ring, and does not track b
		member("r-2", ring, "0", map[string]string{v1alpha1.CordonedAnnotation: "by test"}),
		clusterLease("a", "r-0@1"), clusterLease("b", "r-1@1"),
		remoteCluster("a", "r-2", ""), remoteCluster("b", "r-1", ""), // a's status names a former owner
	}
	c = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	if rep, err = status.Collect(t.Context(), c, ns, nil); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, w := range rep.Warnings {
		msgs = append(msgs, w.Message)
	}
	got := strings.Join(msgs, "\n")
	for _, want := range []string{"r-1 disagrees on the ring", "r-1: 1 cluster Leases name it, it tracks 0", `a: status names owner "r-2", the Leases "r-0"`} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings lack %q:\n%s", want, got)
		}
	}
	if len(rep.Warnings) != 3 {
		t.Errorf("want 3 warnings, got:\n%s", got)
	}
	// Confirm keeps only what an earlier report saw too.
	confirmed := *rep
	confirmed.Warnings = append([]status.Warning(nil), rep.Warnings...)
	confirmed.Confirm(&status.Report{Warnings: []status.Warning{{Key: "ring/r-1"}, {Key: "tracked/r-0"}}})
	if len(confirmed.Warnings) != 1 || confirmed.Warnings[0].Key != "ring/r-1" {
		t.Errorf("confirmed warnings: %+v", confirmed.Warnings)
	}
	buf.Reset()
	_ = rep.WriteTable(&buf)
	if !strings.Contains(buf.String(), "WARNING: r-1 disagrees on the ring") {
		t.Errorf("table lacks the warnings:\n%s", buf.String())
	}
}

// Sources that name a RemoteCluster which does not exist show as a warning
// naming the cluster and the sources, so that nothing sits uncopied without
// a word in `clustershard status`; sources of an existing cluster do not.
func TestCollectFlagsSourcesOfMissingClusters(t *testing.T) {
	kind, err := remotecopy.ParseKind(fleet.ExampleKind)
	if err != nil {
		t.Fatal(err)
	}
	source := func(name, cluster string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kind.GVK)
		u.SetNamespace("team")
		u.SetName(name)
		_ = unstructured.SetNestedField(u.Object, cluster, "spec", "remoteCluster")
		return u
	}
	ring := shard.RingHash([]string{"r-0"})
	objs := []client.Object{
		member("r-0", ring, "1", nil), clusterLease("east", "r-0@1"), remoteCluster("east", "r-0", ""),
		source("ok", "east"), source("typo-1", "eats"), source("typo-2", "eats"),
	}
	c := fake.NewClientBuilder().WithScheme(fleet.Scheme()).WithObjects(objs...).Build()
	rep, err := status.Collect(t.Context(), c, ns, []remotecopy.Kind{kind})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Warnings) != 1 {
		t.Fatalf("want one warning, for the sources of eats: %+v", rep.Warnings)
	}
	w := rep.Warnings[0]
	for _, want := range []string{`RemoteCluster "eats"`, "no RemoteCluster of that name exists", "ExampleChaos team/typo-1", "ExampleChaos team/typo-2", "2 source(s)"} {
		if !strings.Contains(w.Message, want) {
			t.Errorf("warning %q lacks %q", w.Message, want)
		}
	}
	if w.Key != "missing-cluster/eats" {
		t.Errorf("warning key %q", w.Key)
	}
}
