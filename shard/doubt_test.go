package shard_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/registry"
	"github.com/clustershard/clustershard/shard"
	"github.com/clustershard/clustershard/test/netproxy"
)

// A remote write that may still land keeps its cluster's Lease from being
// released: one sent through the fenced transport into a black hole (its
// connection stops forwarding, the write is cut at the fence deadline, the
// remote API server may still process it until its server-side timeout),
// and one still in flight when the hand-over begins. When a joining replica
// moves both clusters, their Leases are abandoned (left to expire) instead of
// released, and the new owner takes them only a lease duration later, after
// the in-doubt write's server-side deadline, while the other moved clusters
// are released and taken at once (their released-by mark lasts only until
// b's acquisition, so the test sees the release in how soon b owns them).
func TestWriteInDoubtAbandonsTheLease(t *testing.T) {
	ns := namespace(t, "write-doubt")
	clusters := names(8)
	tr := newTracker()
	in := map[string]*instance{}
	var jmu sync.Mutex
	var journal []shard.JournalEntry
	in["a"] = startInstanceWith(t, ns, "a", clusters, trackingHandler{"a", tr}, nil, func(o *shard.Options) {
		o.Journal = func(e shard.JournalEntry) {
			jmu.Lock()
			defer jmu.Unlock()
			journal = append(journal, e)
		}
	})
	settled(t, tr, ns, expected(t, []string{"a"}, clusters), in, 30*time.Second)
	var moving []string
	for _, c := range clusters {
		if expected(t, []string{"a", "b"}, clusters)[c] == "b" {
			moving = append(moving, c)
		}
	}
	if len(moving) < 3 {
		t.Fatalf("want at least three clusters moving to b, got %v", moving)
	}
	cut, inflight := moving[0], moving[1]
	doubtBefore := testutil.ToFloat64(metrics.RemoteWritesInDoubt)

	// The black-holed write of cluster cut.
	u, err := url.Parse(env.Remotes[0].Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	p, err := netproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	cfg := rest.CopyConfig(env.Remotes[0].Config)
	cfg.Host = "https://" + p.Addr()
	cs, err := kubernetes.NewForConfig(registry.FencedConfig(cfg, cut, in["a"].c))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Fatal(err) // a connection open before the black hole
	}
	p.Hold()
	_, err = cs.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "in-doubt"}}, metav1.CreateOptions{})
	cutAt := time.Now()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the black-holed write cut at the fence deadline, got %v", err)
	}
	if d := testutil.ToFloat64(metrics.RemoteWritesInDoubt) - doubtBefore; d != 1 {
		t.Fatalf("clustershard_remote_writes_in_doubt_total rose by %v, want 1", d)
	}
	// The write of cluster inflight, reported as the transport does, ends
	// only after the hand-over.
	ended := in["a"].c.WriteBegan(inflight)

	joined := time.Now()
	in["b"] = startInstance(t, ns, "b", clusters, trackingHandler{"b", tr})
	type seen struct {
		abandoned, released bool
		owned               time.Time
	}
	watch := map[string]*seen{}
	for _, c := range moving {
		watch[c] = &seen{}
	}
	bound := 2*leaseDuration + 10*time.Second
	err = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, bound, true, func(ctx context.Context) (bool, error) {
		all := true
		for c, s := range watch {
			var l coordinationv1.Lease
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: shard.ClusterLeaseName(c)}, &l); err == nil {
				s.abandoned = s.abandoned || l.Annotations[v1alpha1.AbandonedAnnotation] == "true"
				s.released = s.released || l.Annotations[v1alpha1.ReleasedByAnnotation] == "a"
			}
			if s.owned.IsZero() && in["b"].c.Owns(c) {
				s.owned = time.Now()
			}
			if c == inflight && s.abandoned && ended != nil {
				ended(time.Time{}) // answered, after the hand-over abandoned the Lease
				ended = nil
			}
			all = all && !s.owned.IsZero()
		}
		return all, nil
	})
	if ended != nil {
		ended(time.Time{})
	}
	for _, c := range moving {
		s := watch[c]
		t.Logf("%s: abandoned %v, released %v, owned by b %v after b joined", c, s.abandoned, s.released, s.owned.Sub(joined).Round(time.Millisecond))
	}
	if err != nil {
		t.Fatalf("b did not own every moved cluster within %v", bound)
	}
	for _, c := range []string{cut, inflight} {
		if s := watch[c]; !s.abandoned || s.released {
			t.Errorf("%s, with a write that may still land, was released instead of abandoned (abandoned %v, released %v)", c, s.abandoned, s.released)
		}
	}
	if s := watch[cut]; s.owned.Before(cutAt.Add(leaseDuration)) {
		t.Errorf("b owned %s %v after its in-doubt write was cut: before the server-side deadline plus a lease duration", cut, s.owned.Sub(cutAt).Round(time.Millisecond))
	}
	for _, c := range moving[2:] { // released: b took them at once
		if s := watch[c]; s.abandoned || s.owned.Sub(joined) >= leaseDuration {
			t.Errorf("%s, with no write in doubt, was not released at once (abandoned %v, owned by b %v after b joined)", c, s.abandoned, s.owned.Sub(joined))
		}
	}
	// The journal tells the two apart, so that a checker bounds an
	// abandoned cluster's gap by the lease duration, not by a release's.
	jmu.Lock()
	released := map[string]string{}
	for _, e := range journal {
		if e.Event == shard.JournalReleased {
			released[e.Cluster] = e.Detail
		}
	}
	jmu.Unlock()
	for _, c := range moving {
		want := ""
		if c == cut || c == inflight {
			want = shard.JournalAbandoned
		}
		if d, ok := released[c]; !ok || d != want {
			t.Errorf("%s: journalled released with detail %q (journalled: %v), want %q", c, d, ok, want)
		}
	}
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("overlaps: %v", v)
	}
}

// A remote write still on its way when the hand-over begins, and answered
// while the hand-over waits for it (within StopTimeout), does not cost the
// next owner a lease duration: the Lease is released, not abandoned, and
// only after the write was answered. (A spawn's epoch raise or install runs
// outside the remote manager and may be on its way when the ring moves the
// cluster: abandoning its Lease made the cluster wait a lease duration.)
func TestWriteAnsweredDuringHandOverIsWaitedFor(t *testing.T) {
	ns := namespace(t, "write-answered")
	clusters := names(6)
	tr := newTracker()
	in := map[string]*instance{}
	in["a"] = startInstance(t, ns, "a", clusters, trackingHandler{"a", tr})
	settled(t, tr, ns, expected(t, []string{"a"}, clusters), in, 30*time.Second)
	var moving string
	for _, c := range clusters {
		if expected(t, []string{"a", "b"}, clusters)[c] == "b" {
			moving = c
			break
		}
	}
	if moving == "" {
		t.Fatal("no cluster moves to b")
	}
	ended := in["a"].c.WriteBegan(moving)

	joined := time.Now()
	in["b"] = startInstance(t, ns, "b", clusters, trackingHandler{"b", tr})
	var handOverAt, answeredAt, releasedAt, ownedAt time.Time
	abandoned := false
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, leaseDuration+10*time.Second, true, func(ctx context.Context) (bool, error) {
		now := time.Now()
		if handOverAt.IsZero() && !in["a"].c.Owns(moving) {
			handOverAt = now // a is handing it over, the write still on its way
		}
		if !handOverAt.IsZero() && answeredAt.IsZero() && now.Sub(handOverAt) > 300*time.Millisecond {
			ended(time.Time{}) // answered
			answeredAt = time.Now()
		}
		var l coordinationv1.Lease
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: shard.ClusterLeaseName(moving)}, &l); err == nil {
			abandoned = abandoned || l.Annotations[v1alpha1.AbandonedAnnotation] == "true"
			if releasedAt.IsZero() && l.Annotations[v1alpha1.ReleasedByAnnotation] == "a" {
				releasedAt = now
			}
		}
		if ownedAt.IsZero() && in["b"].c.Owns(moving) {
			ownedAt = now
		}
		return !ownedAt.IsZero(), nil
	})
	if answeredAt.IsZero() {
		ended(time.Time{})
	}
	t.Logf("%s: hand-over %v, answered %v, released %v, owned by b %v after b joined", moving,
		handOverAt.Sub(joined).Round(time.Millisecond), answeredAt.Sub(joined).Round(time.Millisecond),
		releasedAt.Sub(joined).Round(time.Millisecond), ownedAt.Sub(joined).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("b did not own %s: %v", moving, err)
	}
	if abandoned || answeredAt.IsZero() {
		t.Errorf("the Lease was abandoned (%v), or the write was never seen on its way during the hand-over (answered %v)", abandoned, !answeredAt.IsZero())
	}
	if !releasedAt.IsZero() && releasedAt.Before(answeredAt) {
		t.Errorf("released %v before the write was answered", answeredAt.Sub(releasedAt))
	}
	if ownedAt.Before(answeredAt) {
		t.Errorf("b owned %s %v before a's write was answered", moving, answeredAt.Sub(ownedAt))
	}
	if ownedAt.Sub(answeredAt) >= leaseDuration {
		t.Errorf("b owned %s %v after the write was answered: the Lease waited a lease duration", moving, ownedAt.Sub(answeredAt))
	}
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("overlaps: %v", v)
	}
}

// A replica does not take a cluster again while a write it made under its
// earlier authority may still land (rule 1): after a lapse it regains its
// membership and its other clusters, but the cluster whose write is still on
// its way stays unowned until that write is answered, then is acquired at
// once. Taken earlier, the replica would raise a new epoch with its own
// earlier write still open at the remote API server, which could admit it
// after the raise.
func TestWriteInDoubtIsNotReacquiredAfterALapse(t *testing.T) {
	ns := namespace(t, "doubt-reacquire")
	clusters := names(4)
	tr := newTracker()
	in := map[string]*instance{}
	in["a"] = startInstance(t, ns, "a", clusters, trackingHandler{"a", tr})
	settled(t, tr, ns, expected(t, []string{"a"}, clusters), in, 30*time.Second)
	held, others := clusters[0], clusters[1:]
	ended := in["a"].c.WriteBegan(held)
	defer ended(time.Time{})

	resume := in["a"].c.Pause()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, renewDeadline+5*time.Second, true, func(context.Context) (bool, error) {
		for _, c := range clusters {
			if in["a"].c.Holds(c) { // past the grace after validity too
				return false, nil
			}
		}
		return true, nil
	})
	resume()
	if err != nil {
		t.Fatalf("still owning %v after a lapse", in["a"].c.Owned())
	}
	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, leaseDuration+5*time.Second, true, func(context.Context) (bool, error) {
		for _, c := range others {
			if !in["a"].c.Owns(c) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the clusters with no write in doubt were not taken again after the lapse: owning %v", in["a"].c.Owned())
	}
	// A few more passes: the held cluster must stay unowned.
	deadline := time.Now().Add(4 * retryPeriod)
	for time.Now().Before(deadline) {
		if in["a"].c.Owns(held) {
			t.Fatalf("%s taken again while a write of the earlier authority was still on its way", held)
		}
		if _, why, ok := in["a"].c.UnownedCluster(held); !ok || !strings.Contains(why, "still in flight") {
			t.Fatalf("%s not reported unowned with the write in doubt as the reason: %q (unowned %v)", held, why, ok)
		}
		time.Sleep(20 * time.Millisecond)
	}
	answered := time.Now()
	ended(time.Time{})
	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, leaseDuration+5*time.Second, true, func(context.Context) (bool, error) {
		return in["a"].c.Owns(held), nil
	})
	if err != nil {
		t.Fatalf("%s not taken again once its write was answered", held)
	}
	t.Logf("%s taken again %v after its write was answered", held, time.Since(answered).Round(time.Millisecond))
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("overlaps: %v", v)
	}
}
