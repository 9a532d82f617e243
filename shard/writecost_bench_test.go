package shard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/shard"
)

// The write-cost benchmark compares the API writes per second that keeping
// ownership of M clusters costs in steady state, against a real
// kube-apiserver: the shard coordinator (R replicas, one membership Lease
// each, cluster Leases written only on moves) versus the naive design (one
// client-go LeaderElector per replica and cluster, each leader renewing its
// cluster's Lease every RetryPeriod).
//
// Run it with
//
//	KUBEBUILDER_ASSETS=$PWD/bin go test -run '^$' -bench BenchmarkOwnershipWrites -benchtime=1x -timeout 30m ./shard
//
// CLUSTERSHARD_BENCH_WINDOW (a Go duration, default 60s) sets the measuring
// window; CLUSTERSHARD_BENCH_VERBOSE=1 sends the coordinators' and electors'
// logs to stderr.

const (
	benchReplicas      = 3
	benchLeaseDuration = 15 * time.Second
	benchRenewDeadline = 10 * time.Second
	benchRetryPeriod   = 2 * time.Second
	benchQPS           = 1000
	benchBurst         = 2000
	benchReadyTimeout  = 3 * time.Minute // until every cluster is owned / led
	benchSettleTimeout = 3 * time.Minute // until the coordinators stop moving clusters
	benchSettleQuiet   = 5 * time.Second // no ownership change for this long = settled
	benchShutdown      = 30 * time.Second
	benchDefaultWindow = 60 * time.Second
	benchWindowEnv     = "CLUSTERSHARD_BENCH_WINDOW"
	benchVerboseEnv    = "CLUSTERSHARD_BENCH_VERBOSE"
)

func BenchmarkOwnershipWrites(b *testing.B) {
	window := benchWindow(b)
	for _, m := range []int{200, 1000} {
		b.Run(fmt.Sprintf("M=%d", m), func(b *testing.B) {
			clusters := benchClusterNames(m)
			// The baseline logs and reports the ratio: the output of a
			// benchmark with sub-benchmarks is not printed.
			var cs float64
			b.Run("clustershard", func(b *testing.B) { cs = benchClustershard(b, clusters, window) })
			b.Run("baseline", func(b *testing.B) { benchBaseline(b, clusters, window, cs) })
		})
	}
}

// benchClustershard runs benchReplicas coordinators over clusters and returns
// their steady-state ownership writes per second.
func benchClustershard(b *testing.B, clusters []string, window time.Duration) float64 {
	ctx := context.Background()
	ns := benchNamespace(b, fmt.Sprintf("bench-cs-%d", len(clusters)))
	names := slices.Clone(clusters)
	lister := func() ([]string, error) { return names, nil }

	runCtx, cancel := context.WithCancel(benchLogContext(ctx, "clustershard"))
	var wg sync.WaitGroup
	runErrs := make([]error, benchReplicas)
	coords := make([]*shard.Coordinator, 0, benchReplicas)
	defer func() {
		start := time.Now()
		cancel()
		wg.Wait()
		for i, err := range runErrs {
			if err != nil {
				b.Logf("replica %d: Run returned: %v", i, err)
			}
		}
		b.Logf("coordinators stopped in %v", time.Since(start).Round(time.Millisecond))
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.OwnershipWrites)
	initial := benchWriteBreakdown(b, reg)
	start := time.Now()
	for i := range benchReplicas {
		cl, kube := benchClients(b)
		c, err := shard.New(shard.Options{
			Identity:      fmt.Sprintf("bench-%d", i),
			Namespace:     ns,
			Client:        cl,
			Kube:          kube,
			Clusters:      lister,
			Handler:       benchNoopHandler{},
			Logger:        benchLogger(fmt.Sprintf("bench-%d", i)),
			LeaseDuration: benchLeaseDuration,
			RenewDeadline: benchRenewDeadline,
			RetryPeriod:   benchRetryPeriod,
		})
		if err != nil {
			b.Fatalf("shard.New: %v", err)
		}
		coords = append(coords, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			runErrs[i] = c.Run(runCtx, benchShutdown)
		}()
	}

	// Every cluster owned by some replica.
	deadline := start.Add(benchReadyTimeout)
	for {
		owners, _ := benchOwnership(coords)
		if len(owners) == len(clusters) {
			break
		}
		if time.Now().After(deadline) {
			benchDumpClustershard(b, ns, coords, clusters)
			b.Fatalf("after %v the replicas own %d of %d clusters", benchReadyTimeout, len(owners), len(clusters))
		}
		time.Sleep(250 * time.Millisecond)
	}
	covered := time.Since(start)
	_, per := benchOwnership(coords)
	b.Logf("all %d clusters owned after %v (per replica %v), %d ownership writes so far",
		len(clusters), covered.Round(time.Millisecond), per, benchSumWrites(coords))

	// Steady state: no cluster moves for benchSettleQuiet (the first replica
	// up may have taken clusters that the ring then hands over).
	settleStart := time.Now()
	prev, _ := benchOwnership(coords)
	quietSince := time.Now()
	settled := false
	for time.Since(settleStart) < benchSettleTimeout {
		time.Sleep(500 * time.Millisecond)
		cur, _ := benchOwnership(coords)
		if len(cur) != len(clusters) || !benchSameOwners(prev, cur) {
			quietSince = time.Now()
		}
		prev = cur
		if time.Since(quietSince) >= benchSettleQuiet {
			settled = true
			break
		}
	}
	_, per = benchOwnership(coords)
	if settled {
		b.Logf("ownership settled %v after full coverage (per replica %v), %d ownership writes so far",
			time.Since(settleStart).Round(time.Millisecond), per, benchSumWrites(coords))
	} else {
		b.Logf("ODD: ownership still changing %v after full coverage (per replica %v); measuring anyway", benchSettleTimeout, per)
	}

	var writes int64
	var elapsed time.Duration
	var moved int
	before := benchWriteBreakdown(b, reg)
	b.Logf("ownership writes before the window, by resource/verb: %s", benchBreakdownDelta(initial, before))
	for b.Loop() {
		owners0, _ := benchOwnership(coords)
		w0, t0 := benchSumWrites(coords), time.Now()
		time.Sleep(window)
		w1, t1 := benchSumWrites(coords), time.Now()
		owners1, _ := benchOwnership(coords)
		writes += w1 - w0
		elapsed += t1.Sub(t0)
		moved += benchMoved(owners0, owners1)
		if len(owners1) != len(clusters) {
			b.Logf("ODD: at the end of the window only %d of %d clusters are owned", len(owners1), len(clusters))
		}
	}
	after := benchWriteBreakdown(b, reg)
	rate := float64(writes) / elapsed.Seconds()
	b.ReportMetric(rate, "writes/s")
	b.Logf("clustershard M=%d: %d ownership writes in %v = %.2f writes/s; by resource/verb: %s; clusters that changed owner: %d",
		len(clusters), writes, elapsed.Round(time.Millisecond), rate, benchBreakdownDelta(before, after), moved)
	if dup := benchDoubleOwned(coords); len(dup) > 0 {
		b.Logf("ODD: %d clusters owned by more than one replica at the end: %v", len(dup), benchFirst(dup, 10))
	}
	return rate
}

// benchBaseline runs the naive design over clusters: one LeaderElector per
// replica and cluster. It reports the steady-state writes per second and
// their ratio to clustershard's rate cs (when cs > 0).
func benchBaseline(b *testing.B, clusters []string, window time.Duration, cs float64) {
	ctx := context.Background()
	ns := benchNamespace(b, fmt.Sprintf("bench-naive-%d", len(clusters)))
	counts := &benchLockCounters{}

	runCtx, cancel := context.WithCancel(benchLogContext(ctx, "baseline"))
	var wg sync.WaitGroup
	defer func() {
		start := time.Now()
		cancel()
		wg.Wait()
		b.Logf("%d electors stopped in %v", benchReplicas*len(clusters), time.Since(start).Round(time.Millisecond))
	}()

	start := time.Now()
	for i := range benchReplicas {
		_, kube := benchClients(b)
		identity := fmt.Sprintf("bench-naive-%d", i)
		for _, name := range clusters {
			lock := &benchCountingLock{
				Interface: &resourcelock.LeaseLock{
					LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: "naive-" + name},
					Client:     kube.CoordinationV1(),
					LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
				},
				n: counts,
			}
			cfg := leaderelection.LeaderElectionConfig{
				Lock:          lock,
				LeaseDuration: benchLeaseDuration,
				RenewDeadline: benchRenewDeadline,
				RetryPeriod:   benchRetryPeriod,
				Name:          "naive-" + name,
				Callbacks: leaderelection.LeaderCallbacks{
					OnStartedLeading: func(context.Context) { counts.started.Add(1) },
					OnStoppedLeading: func() { counts.stopped.Add(1) },
				},
			}
			if _, err := leaderelection.NewLeaderElector(cfg); err != nil {
				b.Fatalf("leader elector: %v", err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The naive design runs for the cluster again after losing it.
				for runCtx.Err() == nil {
					le, _ := leaderelection.NewLeaderElector(cfg)
					le.Run(runCtx)
				}
			}()
		}
	}

	// Every cluster has a leader.
	deadline := start.Add(benchReadyTimeout)
	for {
		held, _, err := benchNaiveLeases(ctx, ns)
		if err == nil && held == len(clusters) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("after %v %d of %d naive Leases have a holder (last error: %v); writes %d, failed %d",
				benchReadyTimeout, held, len(clusters), err, counts.writes.Load(), counts.failed.Load())
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.Logf("every cluster has a leader after %v, %d writes (%d failed) so far",
		time.Since(start).Round(time.Millisecond), counts.writes.Load(), counts.failed.Load())

	var writes, failed, reads, latency, started, stopped, transitions int64
	var elapsed time.Duration
	preKinds, winKinds := map[string]int{}, map[string]int{}
	for b.Loop() {
		_, tr0, err0 := benchNaiveLeases(ctx, ns)
		benchMergeKinds(preKinds, counts.errorKinds())
		counts.maxLatency.Store(0)
		w0, f0, r0, d0, s0, l0, t0 := counts.writes.Load(), counts.failed.Load(), counts.reads.Load(), counts.latency.Load(), counts.started.Load(), counts.stopped.Load(), time.Now()
		time.Sleep(window)
		benchMergeKinds(winKinds, counts.errorKinds())
		w1, f1, r1, d1, s1, l1, t1 := counts.writes.Load(), counts.failed.Load(), counts.reads.Load(), counts.latency.Load(), counts.started.Load(), counts.stopped.Load(), time.Now()
		held, tr1, err1 := benchNaiveLeases(ctx, ns)
		writes += w1 - w0
		failed += f1 - f0
		reads += r1 - r0
		latency += d1 - d0
		started += s1 - s0
		stopped += l1 - l0
		elapsed += t1.Sub(t0)
		if err0 == nil && err1 == nil {
			transitions += tr1 - tr0
		} else {
			b.Logf("cannot count Lease transitions: %v %v", err0, err1)
		}
		if held != len(clusters) {
			b.Logf("ODD: at the end of the window %d of %d naive Leases have a holder", held, len(clusters))
		}
	}
	rate := float64(writes) / elapsed.Seconds()
	b.ReportMetric(rate, "writes/s")
	b.ReportMetric(float64(failed)/elapsed.Seconds(), "failed-writes/s")
	b.ReportMetric(float64(transitions), "leader-changes")
	meanLatency := time.Duration(0)
	if writes > 0 {
		meanLatency = time.Duration(latency / writes)
	}
	b.Logf("baseline M=%d: %d Lease writes in %v = %.2f writes/s (%d failed = %.2f/s; M/RetryPeriod = %.1f/s); "+
		"write latency mean %v max %v; %.1f Lease reads/s; leader changes in the window: %d Lease transitions, %d leaderships lost, %d acquired",
		len(clusters), writes, elapsed.Round(time.Millisecond), rate, failed, float64(failed)/elapsed.Seconds(),
		float64(len(clusters))/benchRetryPeriod.Seconds(), meanLatency.Round(time.Microsecond),
		time.Duration(counts.maxLatency.Load()).Round(time.Microsecond), float64(reads)/elapsed.Seconds(),
		transitions, stopped, started)
	if len(preKinds) > 0 {
		b.Logf("failed writes before the window, by kind: %v", preKinds)
	}
	if len(winKinds) > 0 {
		b.Logf("failed writes in the window, by kind: %v", winKinds)
	}
	if cs > 0 {
		b.ReportMetric(rate/cs, "x-clustershard")
		b.Logf("M=%d: baseline %.2f writes/s vs clustershard %.2f writes/s: baseline/clustershard = %.1fx", len(clusters), rate, cs, rate/cs)
	} else {
		b.Logf("M=%d: no clustershard rate to compare with", len(clusters))
	}
}

// benchWindow is the measuring window from benchWindowEnv.
func benchWindow(b *testing.B) time.Duration {
	s := os.Getenv(benchWindowEnv)
	if s == "" {
		return benchDefaultWindow
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: want a positive Go duration such as 20s", benchWindowEnv, s)
	}
	return d
}

func benchClusterNames(m int) []string {
	names := make([]string, m)
	for i := range names {
		names[i] = fmt.Sprintf("c-%04d", i)
	}
	return names
}

// benchNamespace creates a fresh namespace named base, or base-rN when an
// earlier run (-count) left base behind.
func benchNamespace(b *testing.B, base string) string {
	ctx := context.Background()
	for n := 1; ; n++ {
		name := base
		if n > 1 {
			name = fmt.Sprintf("%s-r%d", base, n)
		}
		err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
		switch {
		case err == nil:
			return name
		case apierrors.IsAlreadyExists(err):
			continue
		default:
			b.Fatalf("create namespace %s: %v", name, err)
		}
	}
}

// benchClients returns the clients of one replica: a direct controller-runtime
// client and a clientset sharing one HTTP client of its own (a replica is its
// own process, with its own connection to the API server).
func benchClients(b *testing.B) (client.Client, kubernetes.Interface) {
	cfg := rest.CopyConfig(env.Management.Config)
	cfg.QPS, cfg.Burst = benchQPS, benchBurst
	// A Dial function keeps client-go from sharing a cached transport.
	cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatalf("http client: %v", err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: env.Scheme, HTTPClient: hc})
	if err != nil {
		b.Fatalf("client: %v", err)
	}
	kube, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		b.Fatalf("clientset: %v", err)
	}
	return cl, kube
}

func benchVerbose() bool { return os.Getenv(benchVerboseEnv) != "" }

func benchLogger(name string) logr.Logger {
	if !benchVerbose() {
		return logr.Discard()
	}
	return funcr.New(func(prefix, args string) {
		fmt.Fprintln(os.Stderr, prefix, args)
	}, funcr.Options{}).WithName(name)
}

// benchLogContext carries the logger client-go's leader election takes from
// the context (it logs every acquisition at info level).
func benchLogContext(ctx context.Context, name string) context.Context {
	return logr.NewContext(ctx, benchLogger(name))
}

type benchNoopHandler struct{}

func (benchNoopHandler) Acquired(context.Context, string)   {}
func (benchNoopHandler) Lost(context.Context, string) error { return nil }

// benchOwnership returns the owner of every owned cluster (the last replica
// claiming it) and how many clusters each replica owns.
func benchOwnership(coords []*shard.Coordinator) (map[string]int, []int) {
	owners := map[string]int{}
	per := make([]int, len(coords))
	for i, c := range coords {
		owned := c.Owned()
		per[i] = len(owned)
		for _, n := range owned {
			owners[n] = i
		}
	}
	return owners, per
}

func benchDoubleOwned(coords []*shard.Coordinator) []string {
	count := map[string]int{}
	for _, c := range coords {
		for _, n := range c.Owned() {
			count[n]++
		}
	}
	var dup []string
	for n, k := range count {
		if k > 1 {
			dup = append(dup, n)
		}
	}
	sort.Strings(dup)
	return dup
}

func benchSameOwners(a, b map[string]int) bool {
	return benchMoved(a, b) == 0 && len(a) == len(b)
}

// benchMoved counts the clusters of a whose owner differs in b (or is gone).
func benchMoved(a, b map[string]int) int {
	moved := 0
	for n, o := range a {
		if p, ok := b[n]; !ok || p != o {
			moved++
		}
	}
	return moved
}

func benchSumWrites(coords []*shard.Coordinator) int64 {
	var sum int64
	for _, c := range coords {
		sum += c.OwnershipWrites()
	}
	return sum
}

// benchWriteBreakdown reads the ownership write counter by resource/verb
// (summed over every coordinator of the process).
func benchWriteBreakdown(b *testing.B, reg *prometheus.Registry) map[string]float64 {
	out := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		b.Logf("gather metrics: %v", err)
		return out
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			out[strings.Join(labels, "/")] += m.GetCounter().GetValue()
		}
	}
	return out
}

func benchBreakdownDelta(before, after map[string]float64) string {
	var parts []string
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			parts = append(parts, fmt.Sprintf("%s=%.0f", k, d))
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func benchMergeKinds(into, from map[string]int) {
	for k, v := range from {
		into[k] += v
	}
}

func benchFirst(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// benchNaiveLeases returns how many naive Leases have a holder and the sum of
// their leaseTransitions.
func benchNaiveLeases(ctx context.Context, ns string) (held int, transitions int64, err error) {
	var list coordinationv1.LeaseList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, 0, err
	}
	for _, l := range list.Items {
		if !strings.HasPrefix(l.Name, "naive-") {
			continue
		}
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			held++
		}
		if l.Spec.LeaseTransitions != nil {
			transitions += int64(*l.Spec.LeaseTransitions)
		}
	}
	return held, transitions, nil
}

// benchDumpClustershard logs what the replicas and the Leases say when the
// clusters were not all owned in time.
func benchDumpClustershard(b *testing.B, ns string, coords []*shard.Coordinator, clusters []string) {
	owners, _ := benchOwnership(coords)
	for i, c := range coords {
		b.Logf("replica bench-%d: ready=%v owns %d, ownership writes %d", i, c.Ready(), len(c.Owned()), c.OwnershipWrites())
	}
	var missing []string
	for _, n := range clusters {
		if _, ok := owners[n]; !ok {
			missing = append(missing, n)
		}
	}
	b.Logf("%d clusters not owned, e.g. %v", len(missing), benchFirst(missing, 10))
	var list coordinationv1.LeaseList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		b.Logf("list Leases: %v", err)
		return
	}
	holders := map[string]int{}
	for _, l := range list.Items {
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		role := l.Labels[shard.RoleLabel]
		if role == "member" {
			renew := "-"
			if l.Spec.RenewTime != nil {
				renew = l.Spec.RenewTime.Format(time.RFC3339Nano)
			}
			b.Logf("member Lease %s: holder %q renewed %s annotations %v", l.Name, holder, renew, l.Annotations)
			continue
		}
		key := fmt.Sprintf("role=%s holder=%q", role, holder)
		if l.Annotations[shard.AbandonedAnnotation] == "true" {
			key += " abandoned"
		}
		holders[key]++
	}
	b.Logf("%d Leases in %s; cluster Leases by holder: %v", len(list.Items), ns, holders)
}

// benchLockCounters count the naive electors' writes (with their latency in
// nanoseconds), reads and leadership changes.
type benchLockCounters struct {
	writes, failed      atomic.Int64
	latency, maxLatency atomic.Int64
	reads               atomic.Int64
	started, stopped    atomic.Int64

	mu     sync.Mutex
	errors map[string]int // failed writes by kind
}

// errorKinds returns the failed writes by kind and resets them.
func (n *benchLockCounters) errorKinds() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	e := n.errors
	n.errors = nil
	return e
}

// benchCountingLock counts every Create and Update a naive elector sends,
// successful or not.
type benchCountingLock struct {
	resourcelock.Interface
	n *benchLockCounters
}

func (l *benchCountingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.n.reads.Add(1)
	return l.Interface.Get(ctx)
}

func (l *benchCountingLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	err := l.Interface.Create(ctx, ler)
	l.count(start, err)
	return err
}

func (l *benchCountingLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	err := l.Interface.Update(ctx, ler)
	l.count(start, err)
	return err
}

func (l *benchCountingLock) count(start time.Time, err error) {
	d := int64(time.Since(start))
	l.n.writes.Add(1)
	l.n.latency.Add(d)
	for {
		m := l.n.maxLatency.Load()
		if d <= m || l.n.maxLatency.CompareAndSwap(m, d) {
			break
		}
	}
	if err != nil {
		l.n.failed.Add(1)
		kind := string(apierrors.ReasonForError(err))
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			kind = "context deadline exceeded"
		case errors.Is(err, context.Canceled):
			kind = "context canceled"
		case kind == "":
			kind = "other: " + err.Error()
		}
		l.n.mu.Lock()
		if l.n.errors == nil {
			l.n.errors = map[string]int{}
		}
		l.n.errors[kind]++
		l.n.mu.Unlock()
	}
}
