package shard_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/shard"
)

const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

type instance struct {
	name    string
	c       *shard.Coordinator
	cancel  context.CancelFunc
	done    chan error
	cleanup func()
}

func logger() logr.Logger {
	if !testing.Verbose() {
		return logr.Discard()
	}
	return zap.New(zap.UseDevMode(true))
}

func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := env.Client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func startInstance(t *testing.T, ns, name string, clusters []string, h shard.Handler) *instance {
	t.Helper()
	return startInstanceWith(t, ns, name, clusters, h, nil, nil)
}

// startInstanceWith is startInstance with the coordinator's client passed
// through wrap (say an interceptor that fails some writes).
func startInstanceWith(t *testing.T, ns, name string, clusters []string, h shard.Handler, wrap func(client.WithWatch) client.WithWatch, edit func(*shard.Options)) *instance {
	t.Helper()
	cfg := *env.Management.Config
	cfg.QPS, cfg.Burst = 200, 400
	var cl client.WithWatch
	cl, err := client.NewWithWatch(&cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		cl = wrap(cl)
	}
	kube, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	var cp *shard.Coordinator
	o := shard.Options{
		Identity: name, Namespace: ns, Client: cl, Kube: kube,
		Clusters: func() ([]string, error) { return clusters, nil },
		Handler:  runningHandler{h, &cp}, Logger: logger().WithName(name),
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		StopTimeout: 2 * time.Second, MovesPerSecond: 100,
		Ring: shard.RingOptions{LoadFactor: 1.25},
	}
	if edit != nil {
		edit(&o)
	}
	c, err := shard.New(o)
	if err != nil {
		t.Fatal(err)
	}
	cp = c
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{name: name, c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- c.Run(ctx, 20*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if in.cleanup != nil {
			in.cleanup()
		}
		if err := <-in.done; err != nil {
			t.Logf("%s: shutdown: %v", name, err)
		}
	})
	return in
}

// stop is a graceful shutdown (SIGTERM).
func (in *instance) stop(t *testing.T) {
	t.Helper()
	in.cancel()
	if err := <-in.done; err != nil {
		t.Fatalf("%s: graceful shutdown: %v", in.name, err)
	}
	in.done <- nil // for the cleanup
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("cluster-%02d", i)
	}
	return out
}

// holders reads every cluster Lease: cluster -> holder.
func holders(t *testing.T, ns string) map[string]string {
	t.Helper()
	var list coordinationv1.LeaseList
	if err := env.Client.List(t.Context(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LeaseRoleLabel: "cluster"}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			out[l.Annotations[v1alpha1.ClusterAnnotation]] = shard.HolderName(*l.Spec.HolderIdentity)
		}
	}
	return out
}

func expected(t *testing.T, members []string, clusters []string) map[string]string {
	t.Helper()
	r, err := shard.NewRing(members, shard.RingOptions{LoadFactor: 1.25})
	if err != nil {
		t.Fatal(err)
	}
	return r.Assign(clusters)
}

// settled waits until every cluster runs on exactly the instance the ring
// assigns it to, its Lease names that instance, and that instance owns it.
func settled(t *testing.T, tr *tracker, ns string, want map[string]string, in map[string]*instance, timeout time.Duration) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		running, leases := tr.running(), holders(t, ns)
		for c, owner := range want {
			if r := running[c]; len(r) != 1 || r[0] != owner || leases[c] != owner || !in[owner].c.Owns(c) {
				last = fmt.Sprintf("%s: want %s, running on %v, Lease held by %q", c, owner, r, leases[c])
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("not settled after %v: %s", timeout, last)
	}
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("overlaps: %v", v)
	}
}

func TestOwnershipAcrossJoinLeaveAndCrash(t *testing.T) {
	ns := namespace(t, "shard")
	clusters := names(30)
	tr := newTracker()
	in := map[string]*instance{}
	for _, n := range []string{"replica-0", "replica-1", "replica-2"} {
		in[n] = startInstance(t, ns, n, clusters, trackingHandler{n, tr})
	}
	want := expected(t, []string{"replica-0", "replica-1", "replica-2"}, clusters)
	settled(t, tr, ns, want, in, 30*time.Second)
	for _, c := range clusters {
		if n := len(tr.running()[c]); n != 1 {
			t.Fatalf("%s runs on %d instances", c, n)
		}
	}
	// Every decision is visible: each replica's view names the holder.
	eventually := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		for _, i := range in {
			v := i.c.Observed()
			if len(v.Members) != 3 {
				return false, nil
			}
			for c, o := range want {
				if v.Holders[c].Holder != o || v.Holders[c].Since.IsZero() {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if eventually != nil {
		t.Fatal("the replicas' views do not show every holder")
	}

	// Graceful stop: the leaver's clusters move with no overlap, each within 2s.
	moved := []string{}
	for c, o := range want {
		if o == "replica-0" {
			moved = append(moved, c)
		}
	}
	in["replica-0"].stop(t)
	want = expected(t, []string{"replica-1", "replica-2"}, clusters)
	settled(t, tr, ns, want, in, 10*time.Second)
	var worst time.Duration
	for _, c := range moved {
		gap, ok := tr.gap(c, "replica-0", want[c])
		if !ok {
			t.Fatalf("%s: no hand-over recorded", c)
		}
		worst = max(worst, gap)
		if gap > 2*time.Second {
			t.Fatalf("%s: graceful hand-over gap %v > 2s", c, gap)
		}
	}
	t.Logf("graceful: %d clusters moved, worst gap %v", len(moved), worst)

	// Crash: no release; the survivors take over after the lease duration.
	crashed := "replica-1"
	lost := []string{}
	for c, o := range want {
		if o == crashed {
			lost = append(lost, c)
		}
	}
	acquiredBefore := testutil.ToFloat64(metrics.LeaseTransitions.WithLabelValues(metrics.LeaseAcquired))
	expiredBefore := testutil.ToFloat64(metrics.LeaseTransitions.WithLabelValues(metrics.LeaseExpired))
	lostBefore := testutil.ToFloat64(metrics.LeaseTransitions.WithLabelValues(metrics.LeaseLost))
	handoversBefore := histogramCount(t, metrics.HandoverDuration)
	unmanagedBefore, unmanagedSumBefore := histogramCountSum(t, metrics.UnmanagedDuration)
	in[crashed].cleanup = in[crashed].c.Crash()
	crashAt := time.Now()
	tr.stopAll(crashed)
	maxUnowned := sampleMax(metrics.UnownedClusters)
	want = expected(t, []string{"replica-2"}, clusters)
	settled(t, tr, ns, want, in, leaseDuration+5*time.Second)
	t.Logf("crash: %d clusters taken over %v after the crash (lease duration %v)", len(lost), time.Since(crashAt), leaseDuration)
	// The take-over shows in the metrics: one acquisition, one take-over of
	// an expired Lease and one hand-over observation per moved cluster; the
	// time without a manager spans the lease duration; the dead replica's
	// clusters showed as unowned (after its renew deadline) and no longer do.
	if d := testutil.ToFloat64(metrics.LeaseTransitions.WithLabelValues(metrics.LeaseAcquired)) - acquiredBefore; int(d) < len(lost) {
		t.Fatalf("acquisitions counted: %v, want ≥ %d", d, len(lost))
	}
	if d := testutil.ToFloat64(metrics.LeaseTransitions.WithLabelValues(metrics.LeaseExpired)) - expiredBefore; int(d) != len(lost) {
		t.Fatalf("expired take-overs counted: %v, want %d", d, len(lost))
	}
	// A survivor's cache lagging behind its own acquisition is not a loss
	// (it would stop the manager it just started and acquire again).
	if d := testutil.ToFloat64(metrics.LeaseTransitions.WithLabelValues(metrics.LeaseLost)) - lostBefore; d != 0 {
		t.Fatalf("clusters lost by the survivor during the take-over: %v", d)
	}
	eventuallyTrue(t, func() bool { return histogramCount(t, metrics.HandoverDuration)-handoversBefore >= uint64(len(lost)) }, "hand-over observations")
	eventuallyTrue(t, func() bool {
		n, _ := histogramCountSum(t, metrics.UnmanagedDuration)
		return n-unmanagedBefore >= uint64(len(lost))
	}, "time-without-manager observations")
	n, sum := histogramCountSum(t, metrics.UnmanagedDuration)
	if mean := (sum - unmanagedSumBefore) / float64(n-unmanagedBefore); mean < (leaseDuration - 2*retryPeriod).Seconds() {
		t.Fatalf("mean time without manager after a crash: %.2fs, want about the lease duration %v", mean, leaseDuration)
	}
	if m := maxUnowned(); m < 1 {
		t.Fatalf("unowned clusters never rose during the crash take-over (max %v)", m)
	}
	eventuallyTrue(t, func() bool { return testutil.ToFloat64(metrics.UnownedClusters) == 0 }, "no unowned clusters after the take-over")

	// Join: a new replica takes only the clusters the ring moves to it.
	before := want
	in["replica-3"] = startInstance(t, ns, "replica-3", clusters, trackingHandler{"replica-3", tr})
	want = expected(t, []string{"replica-2", "replica-3"}, clusters)
	settled(t, tr, ns, want, in, 20*time.Second)
	for _, c := range clusters {
		if before[c] != want[c] && want[c] != "replica-3" {
			t.Fatalf("%s moved between old replicas on join", c)
		}
	}
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("overlaps: %v", v)
	}
}

// A replica whose renewals are blocked past the lease duration stops being
// allowed to write before anyone else may take its clusters, and after it
// resumes it writes nothing until it has re-acquired ownership.
func TestPausedReplicaIsFenced(t *testing.T) {
	ns := namespace(t, "pause")
	clusters := names(8)
	tr := newTracker()
	writes := newTracker() // intervals during which the fence allowed writes
	in := map[string]*instance{}
	for _, n := range []string{"a", "b"} {
		in[n] = startInstance(t, ns, n, clusters, trackingHandler{n, tr})
	}
	want := expected(t, []string{"a", "b"}, clusters)
	settled(t, tr, ns, want, in, 30*time.Second)

	// Sample every fence decision of both replicas as write intervals.
	stop := sampleOwnership(t, in, clusters, writes)

	resume := in["a"].c.Pause()
	pausedAt := time.Now()
	// b takes every cluster once a's membership has expired for it.
	all := expected(t, []string{"b"}, clusters)
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, leaseDuration+5*time.Second, true, func(context.Context) (bool, error) {
		for _, c := range clusters {
			if !in["b"].c.Owns(c) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal("b did not take over the paused replica's clusters")
	}
	for _, c := range clusters {
		if all[c] != "b" {
			t.Fatalf("ring: %s not on b", c)
		}
		if in["a"].c.Owns(c) {
			t.Fatalf("the paused replica still may write %s %v after the pause began", c, time.Since(pausedAt))
		}
	}
	resume()
	// After resuming, a re-joins and gets its share back through the protocol.
	settled(t, tr, ns, want, in, 30*time.Second)
	stop()
	if v := writes.check(); len(v) > 0 {
		t.Fatalf("write permissions overlapped: %v", v)
	}
	if v := tr.check(); len(v) > 0 {
		t.Fatalf("managers overlapped: %v", v)
	}
	if !slices.Contains(in["a"].c.Owned(), firstOf(want, "a")) {
		t.Fatalf("a owns %v after resuming", in["a"].c.Owned())
	}
}

func firstOf(m map[string]string, owner string) string {
	for c, o := range m {
		if o == owner {
			return c
		}
	}
	return ""
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func histogramCountSum(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// sampleMax samples g every 10ms until the returned function is called,
// which returns the largest value seen.
func sampleMax(g prometheus.Gauge) func() float64 {
	stop, done := make(chan struct{}), make(chan float64)
	go func() {
		highest := testutil.ToFloat64(g)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- highest
				return
			case <-tick.C:
				highest = max(highest, testutil.ToFloat64(g))
			}
		}
	}()
	return func() float64 {
		close(stop)
		return <-done
	}
}

// runningHandler reports, as the registry does through the notifier, that
// the "remote manager" runs once the wrapped handler's Acquired returned.
type runningHandler struct {
	shard.Handler
	c **shard.Coordinator
}

func (h runningHandler) Acquired(ctx context.Context, cluster string) {
	h.Handler.Acquired(ctx, cluster)
	(*h.c).ManagerRunning(cluster)
}

func eventuallyTrue(t *testing.T, cond func() bool, what string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}
