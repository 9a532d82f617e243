package shard

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// These are unit tests of the ownership rules (doc.go) on a fake clock: one
// decision function each, with a fake client standing in for the fresh
// reads. The behaviour of the rules against a real API server and real
// processes is tested by the rest of this package and by the drills.

const (
	testNS    = "rules"
	testLease = 15 * time.Second
	testRenew = 10 * time.Second
)

type nopHandler struct{}

func (nopHandler) Acquired(context.Context, string)   {}
func (nopHandler) Lost(context.Context, string) error { return nil }

// rulesCoordinator is replica "a", process "a@p1", on clk, whose fresh reads
// find objs.
func rulesCoordinator(t *testing.T, clk *clocktesting.FakePassiveClock, objs ...client.Object) *Coordinator {
	t.Helper()
	s := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{
		Identity: "a", Incarnation: "p1", Namespace: testNS,
		Client: fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build(), Kube: kubefake.NewClientset(),
		Clusters: func() ([]string, error) { return nil, nil }, Handler: nopHandler{}, Logger: logr.Discard(),
		LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: 2 * time.Second, Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// lease is a Lease named name held by holder ("" released) at version rv,
// with labels and annotations as given (key, value pairs; a key of a label
// starts with "label:").
func lease(name, holder, rv string, kv ...string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, ResourceVersion: rv,
		Labels: map[string]string{}, Annotations: map[string]string{}}}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := cutLabel(kv[i]); ok {
			l.Labels[k] = kv[i+1]
		} else {
			l.Annotations[kv[i]] = kv[i+1]
		}
	}
	return l
}

func cutLabel(k string) (string, bool) {
	const p = "label:"
	if len(k) > len(p) && k[:len(p)] == p {
		return k[len(p):], true
	}
	return "", false
}

// seen is one observation of a Lease by the coordinator, at an offset from
// the start of the test.
type seen struct {
	at time.Duration
	l  *coordinationv1.Lease
}

// Rule 1: a cluster Lease is free when absent, released, held by this very
// process, marked abandoned and unchanged for a lease duration, or held by
// a process whose membership has expired, confirmed by a fresh read; never
// while its holder is live, and a Lease deleted or overwritten under a live
// holder only once unchanged for a lease duration. Time is the observer's:
// when it saw each version, never a Lease's renewTime.
func TestRule1FreeLease(t *testing.T) {
	cl := ClusterLeaseName("c1")
	mb := MemberLeaseName("b")
	for _, tc := range []struct {
		name  string
		seen  []seen                // observations before the decision
		l     *coordinationv1.Lease // the cluster Lease as listed (nil: absent)
		live  []string              // live members
		fresh []client.Object       // what a fresh read finds
		at    time.Duration         // when the decision is made
		want  bool
	}{
		{name: "absent", at: time.Second, want: true},
		{name: "released", l: lease(cl, "", "5"), at: time.Second, want: true},
		{name: "held by this process", l: lease(cl, "a@p1", "5"), at: time.Second, want: true},
		{name: "held by a live member", l: lease(cl, "b@q1", "5"), live: []string{"b@q1"}, at: time.Hour, want: false},
		{name: "abandoned, changed within a lease duration", seen: []seen{{0, lease(cl, "b@q1", "5", v1alpha1.AbandonedAnnotation, "true")}},
			l: lease(cl, "b@q1", "5", v1alpha1.AbandonedAnnotation, "true"), live: []string{"b@q1"}, at: testLease, want: false},
		{name: "abandoned, unchanged for a lease duration", seen: []seen{{0, lease(cl, "b@q1", "5", v1alpha1.AbandonedAnnotation, "true")}},
			l: lease(cl, "b@q1", "5", v1alpha1.AbandonedAnnotation, "true"), live: []string{"b@q1"}, at: testLease + time.Millisecond, want: true},
		{name: "holder not live, its membership changed within a lease duration",
			seen: []seen{{0, lease(mb, "b@q1", "1")}, {5 * time.Second, lease(mb, "b@q1", "2")}},
			l:    lease(cl, "b@q1", "5"), at: 16 * time.Second, want: false},
		{name: "holder not live, its membership unchanged, and gone on a fresh read",
			seen: []seen{{0, lease(mb, "b@q1", "1")}},
			l:    lease(cl, "b@q1", "5"), at: 16 * time.Second, want: true},
		{name: "holder not live, its membership unchanged, the same on a fresh read",
			seen: []seen{{0, lease(mb, "b@q1", "1")}}, fresh: []client.Object{lease(mb, "b@q1", "1")},
			l: lease(cl, "b@q1", "5"), at: 16 * time.Second, want: true},
		{name: "holder not live in a stale cache, renewed on a fresh read",
			seen: []seen{{0, lease(mb, "b@q1", "1")}}, fresh: []client.Object{lease(mb, "b@q1", "9")},
			l: lease(cl, "b@q1", "5"), at: 16 * time.Second, want: false},
		{name: "holder replaced by another process of its name, within its lease duration",
			seen: []seen{{0, lease(mb, "b@q1", "1")}, {time.Second, lease(mb, "b@q2", "2")}}, fresh: []client.Object{lease(mb, "b@q2", "2")},
			l: lease(cl, "b@q1", "5"), at: 10 * time.Second, want: false},
		{name: "holder replaced by another process of its name, past its lease duration",
			seen: []seen{{0, lease(mb, "b@q1", "1")}, {time.Second, lease(mb, "b@q2", "2")}}, fresh: []client.Object{lease(mb, "b@q2", "2")},
			l: lease(cl, "b@q1", "5"), at: testLease + time.Second, want: true},
		{name: "holder publishes a longer lease duration than ours",
			seen:  []seen{{0, lease(mb, "b@q1", "1", "label:"+v1alpha1.LeaseDurationLabel, "30s", "label:"+v1alpha1.RenewDeadlineLabel, "20s")}},
			fresh: []client.Object{lease(mb, "b@q1", "1", "label:"+v1alpha1.LeaseDurationLabel, "30s", "label:"+v1alpha1.RenewDeadlineLabel, "20s")},
			l:     lease(cl, "b@q1", "5"), at: 20 * time.Second, want: false},
		{name: "holder that published a longer lease duration, past it",
			seen:  []seen{{0, lease(mb, "b@q1", "1", "label:"+v1alpha1.LeaseDurationLabel, "30s", "label:"+v1alpha1.RenewDeadlineLabel, "20s")}},
			fresh: []client.Object{lease(mb, "b@q1", "1", "label:"+v1alpha1.LeaseDurationLabel, "30s", "label:"+v1alpha1.RenewDeadlineLabel, "20s")},
			l:     lease(cl, "b@q1", "5"), at: 30*time.Second + time.Millisecond, want: true},
		{name: "deleted under a live holder, within a lease duration",
			seen: []seen{{0, lease(cl, "b@q1", "5")}}, live: []string{"b@q1"}, at: 5 * time.Second, want: false},
		{name: "deleted under a live holder, past a lease duration",
			seen: []seen{{0, lease(cl, "b@q1", "5")}}, live: []string{"b@q1"}, at: testLease + time.Second, want: true},
		{name: "overwritten as released under a live holder, within a lease duration",
			seen: []seen{{0, lease(cl, "b@q1", "5")}, {time.Second, lease(cl, "", "6")}}, l: lease(cl, "", "6"), live: []string{"b@q1"},
			at: 5 * time.Second, want: false},
		{name: "released by its live holder itself",
			seen: []seen{{0, lease(cl, "b@q1", "5")}, {time.Second, lease(cl, "", "6", v1alpha1.ReleasedByAnnotation, "b@q1")}},
			l:    lease(cl, "", "6", v1alpha1.ReleasedByAnnotation, "b@q1"), live: []string{"b@q1"}, at: 2 * time.Second, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Unix(1_000_000, 0)
			clk := clocktesting.NewFakePassiveClock(t0)
			c := rulesCoordinator(t, clk, tc.fresh...)
			for _, s := range tc.seen {
				c.obs.observe(s.l, t0.Add(s.at))
			}
			if tc.l == nil && len(tc.seen) > 0 {
				c.obs.absent(map[string]*coordinationv1.Lease{}, t0.Add(tc.seen[len(tc.seen)-1].at))
			}
			live := map[string]bool{}
			for _, m := range tc.live {
				live[m] = true
			}
			now := t0.Add(tc.at)
			clk.SetTime(now)
			if got := c.free(t.Context(), cl, tc.l, live, now); got != tc.want {
				t.Errorf("free = %v, want %v", got, tc.want)
			}
		})
	}
}

// Rule 4: a write may go until the renew deadline after the last renewal
// was sent, on this process's clock, and only for a cluster owned in the
// current membership epoch; a renewal that comes after validity ended
// starts a new epoch, which voids the ownership taken before it.
func TestRule4WriteDeadline(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	clk := clocktesting.NewFakePassiveClock(t0)
	c := rulesCoordinator(t, clk)
	if _, err := c.WriteDeadline("c1"); !errors.Is(err, ErrNotMember) {
		t.Fatalf("before any renewal: %v, want ErrNotMember", err)
	}
	c.member.renewed(t0)
	_, epoch, _ := c.member.valid()
	if _, err := c.WriteDeadline("c1"); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("member, cluster not owned: %v, want ErrNotOwner", err)
	}
	c.clusters["c1"] = &cluster{phase: phaseOwned, epoch: epoch, handler: newHandlerLock()}
	c.clusters["c2"] = &cluster{phase: phaseReleasing, epoch: epoch, handler: newHandlerLock()}
	for _, step := range []struct {
		at      time.Duration
		cluster string
		want    error // nil: may write until t0+renew of the last renewal
	}{
		{0, "c1", nil},
		{testRenew - time.Millisecond, "c1", nil},
		{testRenew - time.Millisecond, "c2", ErrNotOwner}, // handing over: no new write
		{testRenew, "c1", ErrNotMember},                   // validity ends at the renew deadline
		{testLease, "c1", ErrNotMember},
	} {
		clk.SetTime(t0.Add(step.at))
		until, err := c.WriteDeadline(step.cluster)
		switch {
		case step.want == nil && (err != nil || !until.Equal(t0.Add(testRenew))):
			t.Errorf("at %v, %s: until %v, %v; want until the renew deadline", step.at, step.cluster, until.Sub(t0), err)
		case step.want != nil && !errors.Is(err, step.want):
			t.Errorf("at %v, %s: %v, want %v", step.at, step.cluster, err, step.want)
		}
	}
	// Within the grace after validity (a quarter of the 5 s margin) the
	// cluster is still owned, its writes refused.
	clk.SetTime(t0.Add(testRenew + time.Second))
	if !c.Holds("c1") || c.Owns("c1") {
		t.Errorf("within the grace: c1 held %v, owned %v; want held, not owned (writable)", c.Holds("c1"), c.Owns("c1"))
	}
	if _, err := c.WriteDeadline("c1"); !errors.Is(err, ErrNotMember) {
		t.Errorf("within the grace: %v, want ErrNotMember (writes fenced)", err)
	}
	// A renewal sent in time but answered after validity and the grace
	// ended: a new epoch, and c1's ownership from the old one is void.
	clk.SetTime(t0.Add(testRenew + 2*time.Second))
	if c.Holds("c1") {
		t.Error("past the grace: c1 still held")
	}
	c.member.renewed(t0.Add(testRenew - time.Second))
	if _, e2, ok := c.member.valid(); !ok || e2 == epoch {
		t.Fatalf("late renewal: valid %v, epoch %d (was %d); want valid in a new epoch", ok, e2, epoch)
	}
	if _, err := c.WriteDeadline("c1"); !errors.Is(err, ErrNotOwner) {
		t.Errorf("after a lapse: %v, want ErrNotOwner (ownership of the old epoch is void)", err)
	}
	// A renewal in time keeps the epoch and moves the deadline.
	_, e2, _ := c.member.valid()
	c.clusters["c1"].epoch = e2
	clk.SetTime(t0.Add(testRenew + 2*time.Second))
	c.member.renewed(t0.Add(testRenew + 2*time.Second))
	if until, err := c.WriteDeadline("c1"); err != nil || !until.Equal(t0.Add(2*testRenew+2*time.Second)) {
		t.Errorf("after a renewal in time: until %v, %v", until.Sub(t0), err)
	}
}
