package shard_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/shard"
)

// placements is a RemoteCluster placement store shared by the instances of a
// test, and a record of the transfers they report.
type placements struct {
	mu        sync.Mutex
	by        map[string]shard.Placement
	transfers []shard.Transfer
}

func (p *placements) set(cluster string, pl shard.Placement) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pl.IsZero() {
		delete(p.by, cluster)
		return
	}
	p.by[cluster] = pl
}

func (p *placements) get() (map[string]shard.Placement, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]shard.Placement, len(p.by))
	for k, v := range p.by {
		out[k] = v
	}
	return out, nil
}

func (p *placements) record(t shard.Transfer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.transfers = append(p.transfers, t)
}

// transfer returns the last transfer of cluster to replica to.
func (p *placements) transfer(cluster, to string) (shard.Transfer, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.transfers) - 1; i >= 0; i-- {
		if tr := p.transfers[i]; tr.Cluster == cluster && shard.HolderName(tr.To) == to {
			return tr, true
		}
	}
	return shard.Transfer{}, false
}

func (p *placements) edit(o *shard.Options) {
	o.Placements = p.get
	o.Transferred = p.record
}

// placed is the assignment the ring makes over members with the test's
// placements.
func placed(t *testing.T, p *placements, members, clusters []string) map[string]string {
	t.Helper()
	r, err := shard.NewRing(members, shard.RingOptions{LoadFactor: 1.25})
	if err != nil {
		t.Fatal(err)
	}
	pl, _ := p.get()
	a, _ := r.Place(clusters, pl)
	return a
}

// cordon sets or removes the cordon of a replica's membership Lease.
func cordon(t *testing.T, ns, replica string, on bool) {
	t.Helper()
	value := `null`
	if on {
		value = `"by test"`
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+v1alpha1.CordonedAnnotation+`":`+value+`}}}`))
	if err := env.Client.Patch(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: shard.MemberLeaseName(replica)}}, patch); err != nil {
		t.Fatal(err)
	}
}

func wantTransfer(t *testing.T, p *placements, cluster, from, to, reason string) {
	t.Helper()
	tr, ok := p.transfer(cluster, to)
	if !ok {
		t.Fatalf("%s: no transfer to %s recorded", cluster, to)
	}
	if shard.HolderName(tr.From) != from || tr.Reason != reason {
		t.Fatalf("%s: transfer %+v, want from %s to %s for %s", cluster, tr, from, to, reason)
	}
	if reason != v1alpha1.TransferCrashTakeover && (tr.WithoutManager <= 0 || tr.WithoutManager > 5*time.Second) {
		t.Fatalf("%s: transfer %+v: time without a manager not measured", cluster, tr)
	}
}

// TestPlacementPinAvoidCordon runs three replicas against the API server and
// checks, with the overlap tracker on throughout: a pin moves a cluster to
// its replica, an avoid moves one away, a cordon empties a replica and
// survives its restart, an uncordon fills it again, a pinned replica that
// crashes lets its pinned cluster fall back (said in the placement note),
// and every change of owner is reported with its reason.
func TestPlacementPinAvoidCordon(t *testing.T) {
	ns := namespace(t, "placement")
	clusters := names(12)
	tr := newTracker()
	p := &placements{by: map[string]shard.Placement{}}
	members := []string{"replica-0", "replica-1", "replica-2"}
	in := map[string]*instance{}
	start := func(n string) {
		in[n] = startInstanceWith(t, ns, n, clusters, trackingHandler{n, tr}, nil, p.edit)
	}
	for _, n := range members {
		start(n)
	}
	want := placed(t, p, members, clusters)
	settled(t, tr, ns, want, in, 30*time.Second)

	// Pin a cluster of replica-0 to replica-2.
	var pinned string
	for _, c := range clusters {
		if want[c] == "replica-0" {
			pinned = c
			break
		}
	}
	p.set(pinned, shard.Placement{Pin: "replica-2"})
	want = placed(t, p, members, clusters)
	settled(t, tr, ns, want, in, 10*time.Second)
	wantTransfer(t, p, pinned, "replica-0", "replica-2", v1alpha1.TransferPin)
	if note := in["replica-2"].c.Placement(pinned); note != "pinned to replica-2" {
		t.Fatalf("placement note of %s: %q", pinned, note)
	}

	// Avoid: a cluster of replica-1 avoids it.
	var avoiding string
	for _, c := range clusters {
		if want[c] == "replica-1" {
			avoiding = c
			break
		}
	}
	p.set(avoiding, shard.Placement{Avoid: []string{"replica-1"}})
	want = placed(t, p, members, clusters)
	if want[avoiding] == "replica-1" {
		t.Fatalf("the ring left %s on the replica it avoids", avoiding)
	}
	settled(t, tr, ns, want, in, 10*time.Second)
	wantTransfer(t, p, avoiding, "replica-1", want[avoiding], v1alpha1.TransferPin)

	// Cordon replica-1: it keeps its membership and hands every cluster over.
	cordon(t, ns, "replica-1", true)
	ring := []string{"replica-0", "replica-2"}
	before := want
	want = placed(t, p, ring, clusters)
	settled(t, tr, ns, want, in, 10*time.Second)
	for c, o := range before {
		if o == "replica-1" {
			wantTransfer(t, p, c, "replica-1", want[c], v1alpha1.TransferDrain)
		}
	}
	if v := in["replica-0"].c.Observed(); !v.Cordoned["replica-1"] || v.Members["replica-1"] {
		t.Fatalf("replica-0's view of a cordoned replica-1: members %v, cordoned %v", v.Members, v.Cordoned)
	}

	// The cordon outlives a restart of replica-1.
	in["replica-1"].stop(t)
	start("replica-1")
	waitMember(t, in["replica-0"], "replica-1")
	// Passes in which replica-1 would take clusters if it were not
	// cordoned: it owns none throughout.
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 2*retryPeriod, true, func(context.Context) (bool, error) {
		if owned := in["replica-1"].c.Owned(); len(owned) != 0 {
			return false, fmt.Errorf("restarted cordoned replica owns %v", owned)
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		t.Fatal(err)
	}
	settled(t, tr, ns, want, in, 10*time.Second)
	// It is ready, though: a pod restarted while cordoned must not stall a
	// rollout that waits for readiness.
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return in["replica-1"].c.Ready(), nil
	}); err != nil {
		t.Fatal("a restarted cordoned replica never became ready")
	}

	// Uncordon: replica-1 takes its share again.
	cordon(t, ns, "replica-1", false)
	want = placed(t, p, members, clusters)
	settled(t, tr, ns, want, in, 10*time.Second)

	// The pinned replica crashes: its pinned cluster falls back to the ring
	// and the note says so.
	in["replica-2"].cleanup = in["replica-2"].c.Crash()
	tr.stopAll("replica-2")
	ring = []string{"replica-0", "replica-1"}
	want = placed(t, p, ring, clusters)
	settled(t, tr, ns, want, in, leaseDuration+10*time.Second)
	wantTransfer(t, p, pinned, "replica-2", want[pinned], v1alpha1.TransferCrashTakeover)
	if note := in[want[pinned]].c.Placement(pinned); !strings.Contains(note, "not on the ring") {
		t.Fatalf("placement note of %s pinned to a crashed replica: %q", pinned, note)
	}

	// Unpin: the cluster stays where the ring puts it.
	p.set(pinned, shard.Placement{})
	want = placed(t, p, ring, clusters)
	settled(t, tr, ns, want, in, 10*time.Second)
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return in[want[pinned]].c.Placement(pinned) == "", nil
	}); err != nil {
		t.Fatalf("placement note of an unpinned cluster: %q", in[want[pinned]].c.Placement(pinned))
	}
}

// waitMember waits until in sees replica as a live member.
func waitMember(t *testing.T, in *instance, replica string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, ok := in.c.Observed().Members[replica]
		return ok, nil
	})
	if err != nil {
		t.Fatal(fmt.Errorf("%s never saw %s live: %w", in.name, replica, err))
	}
}
