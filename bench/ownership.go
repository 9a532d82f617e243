package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/shard"
)

// Production timing of both designs.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

func clusterNames(m int) []string {
	out := make([]string, m)
	for i := range out {
		out[i] = fmt.Sprintf("cluster-%05d", i)
	}
	return out
}

func newNamespace(ctx context.Context, c client.Client, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	err := c.Create(ctx, ns)
	return ns.Name, err
}

// shardWriteCost runs r coordinators over m clusters, waits for a settled
// ownership and measures the ownership writes per second over window.
func shardWriteCost(ctx context.Context, cfg *rest.Config, c client.Client, r, m int, window time.Duration, logf func(string, ...any)) (WriteCost, error) {
	res := WriteCost{Clusters: m, Replicas: r, Window: window.String()}
	ns, err := newNamespace(ctx, c, fmt.Sprintf("bench-shard-%d", m))
	if err != nil {
		return res, err
	}
	f := newCoordinators(cfg, ns, clusterNames(m))
	defer f.close()
	start := time.Now()
	for i := range r {
		if err := f.start(fmt.Sprintf("replica-%d", i)); err != nil {
			return res, err
		}
	}
	_, reached, err := f.settle(ctx, 5*time.Second, 10*time.Minute)
	if err != nil {
		return res, err
	}
	res.ShardReady = reached.Sub(start).Round(time.Millisecond).String()
	w0, t0 := f.writes(), time.Now()
	sleep(ctx, window)
	w1, t1 := f.writes(), time.Now()
	res.Shard = round(float64(w1-w0)/t1.Sub(t0).Seconds(), 3)
	logf("  clustershard M=%d R=%d: settled after %s, %.3f ownership writes/s", m, r, res.ShardReady, res.Shard)
	return res, nil
}

// countingLock counts the writes of a resourcelock.
type countingLock struct {
	resourcelock.Interface
	writes *atomic.Int64
}

func (l countingLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.writes.Add(1)
	return l.Interface.Create(ctx, ler)
}

func (l countingLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.writes.Add(1)
	return l.Interface.Update(ctx, ler)
}

// baselineWriteCost runs the naive design: every one of r replicas runs a
// client-go LeaderElector for every one of m clusters, and the leader of a
// cluster renews its Lease every retry period. It measures writes per
// second over window once every cluster has a leader.
func baselineWriteCost(ctx context.Context, cfg *rest.Config, c client.Client, r, m int, window time.Duration) (float64, error) {
	ns, err := newNamespace(ctx, c, fmt.Sprintf("bench-naive-%d", m))
	if err != nil {
		return 0, err
	}
	var writes atomic.Int64
	var leading atomic.Int64
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i := range r {
		kcfg := rest.CopyConfig(cfg)
		kcfg.QPS, kcfg.Burst = 1000, 2000
		kube, err := kubernetes.NewForConfig(kcfg)
		if err != nil {
			return 0, err
		}
		for _, name := range clusterNames(m) {
			le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
				Lock: countingLock{Interface: &resourcelock.LeaseLock{
					LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: "naive-" + name},
					Client:     kube.CoordinationV1(),
					LockConfig: resourcelock.ResourceLockConfig{Identity: fmt.Sprintf("replica-%d", i)},
				}, writes: &writes},
				LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
				Name: "naive-" + name,
				Callbacks: leaderelection.LeaderCallbacks{
					OnStartedLeading: func(context.Context) { leading.Add(1) },
					OnStoppedLeading: func() { leading.Add(-1) },
				},
			})
			if err != nil {
				return 0, err
			}
			wg.Go(func() { le.Run(runCtx) })
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for leading.Load() < int64(m) {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("only %d of %d naive Leases led after 5m", leading.Load(), m)
		}
		sleep(ctx, 250*time.Millisecond)
	}
	sleep(ctx, retryPeriod) // past the acquisitions
	w0, t0 := writes.Load(), time.Now()
	sleep(ctx, window)
	w1, t1 := writes.Load(), time.Now()
	return round(float64(w1-w0)/t1.Sub(t0).Seconds(), 3), nil
}

// liveBalance runs r coordinators over m clusters, records the balance, adds
// one replica (scale-out), then stops it again (scale-in), counting the
// clusters that changed owner each time.
func liveBalance(ctx context.Context, cfg *rest.Config, c client.Client, r, m int, logf func(string, ...any)) (Balance, error) {
	res := Balance{Mode: "live", Clusters: m, Replicas: r,
		IdealOut: float64(m) / float64(r+1), IdealIn: float64(m) / float64(r+1)}
	ns, err := newNamespace(ctx, c, fmt.Sprintf("bench-balance-%d", r))
	if err != nil {
		return res, err
	}
	f := newCoordinators(cfg, ns, clusterNames(m))
	defer f.close()
	ids := make([]string, r)
	for i := range ids {
		ids[i] = fmt.Sprintf("replica-%d", i)
		if err := f.start(ids[i]); err != nil {
			return res, err
		}
	}
	before, _, err := f.settle(ctx, 5*time.Second, 10*time.Minute)
	if err != nil {
		return res, err
	}
	res.Owned = perReplica(before, ids)
	res.MaxOverMean = round(maxOverMean(res.Owned), 3)
	extra := fmt.Sprintf("replica-%d", r)
	if err := f.start(extra); err != nil {
		return res, err
	}
	out, _, err := f.settle(ctx, 5*time.Second, 10*time.Minute)
	if err != nil {
		return res, err
	}
	res.MovedOut = moved(before, out)
	if err := f.stop(extra); err != nil {
		return res, err
	}
	in, _, err := f.settle(ctx, 5*time.Second, 10*time.Minute)
	if err != nil {
		return res, err
	}
	res.MovedIn = moved(out, in)
	logf("  live R=%d M=%d: owned %v (max/mean %.3f), scale-out moved %d (ideal %.0f), scale-in moved %d (ideal %.0f)",
		r, m, res.Owned, res.MaxOverMean, res.MovedOut, res.IdealOut, res.MovedIn, res.IdealIn)
	return res, nil
}

// ringBalance computes the ring (the production options) for r replicas.
func ringBalance(r, m int) (Balance, error) {
	res := Balance{Mode: "ring", Clusters: m, Replicas: r,
		IdealOut: float64(m) / float64(r+1), IdealIn: float64(m) / float64(r)}
	names := clusterNames(m)
	members := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("replica-%d", i)
		}
		return out
	}
	assign := func(n int) (map[string]string, error) {
		ring, err := shard.NewRing(members(n), shard.RingOptions{})
		if err != nil {
			return nil, err
		}
		return ring.Assign(names), nil
	}
	base, err := assign(r)
	if err != nil {
		return res, err
	}
	out, err := assign(r + 1)
	if err != nil {
		return res, err
	}
	in, err := assign(r - 1)
	if err != nil {
		return res, err
	}
	res.Owned = perReplica(base, members(r))
	res.MaxOverMean = round(maxOverMean(res.Owned), 3)
	res.MovedOut, res.MovedIn = moved(base, out), moved(base, in)
	return res, nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
