package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/test/netproxy"
	"github.com/clustershard/clustershard/tools/drill"
)

// Bulkhead faults: what each bad cluster's remote does, behind a loopback
// proxy of its own.
const (
	// FaultBlackhole accepts connections and never answers.
	FaultBlackhole = "black hole"
	// FaultTrickle answers at 1 byte a second.
	FaultTrickle = "1 byte/s"
	// FaultHang answers each new connection for 2 s, then never again while
	// it stays open: watches (and all else on it) hang after connect.
	FaultHang = "hangs after connect"
)

// bulkheadFaults are the faults staged, one cluster each, in order.
var bulkheadFaults = []string{FaultBlackhole, FaultTrickle, FaultHang}

// bulkheadProbeArgs make a remote API server that stops answering show
// within a few seconds: probe every 1 s (the drill's), give up on one after
// 2 s, Connected=False after 3 in a row.
var bulkheadProbeArgs = []string{"--probe-timeout=2s", "--probe-failures=3"}

// bulkheadProbeBound is how soon a bad cluster must show Connected=False
// with bulkheadProbeArgs: three probes of at most 2 s each, a second apart,
// plus a status write.
const bulkheadProbeBound = 3*(time.Second+2*time.Second) + time.Second

// bulkheads runs the same fleet and churn twice: with every remote healthy,
// and with one cluster behind each of bulkheadFaults; the churn's sources
// are spread over every cluster, and the create-to-copy lag is measured on
// the healthy ones only.
func bulkheads(ctx context.Context, c Config, o drill.Options, logf func(string, ...any)) (*Bulkheads, error) {
	res := &Bulkheads{Clusters: c.BulkheadClusters}
	o.Replicas, o.Remotes, o.ClustersPerRemote, o.ObjectsPerCluster = 3, 3, c.BulkheadClusters/3, 1
	o.ReplicaArgs = append(append([]string{}, o.ReplicaArgs...), bulkheadProbeArgs...)
	for _, faulty := range []bool{false, true} {
		run, bad, crashed, err := bulkheadRun(ctx, c, o, faulty, logf)
		if err != nil {
			return res, err
		}
		res.Runs = append(res.Runs, run)
		res.Crashed = append(res.Crashed, crashed...)
		if faulty {
			res.Bad = bad
		}
	}
	if len(res.Runs) == 2 && res.Runs[0].P99 > 0 {
		res.P99Ratio = round(res.Runs[1].P99/res.Runs[0].P99, 2)
	}
	res.ProbeBound = bulkheadProbeBound.Seconds()
	return res, nil
}

// bulkheadRun is one run; with faulty, the first clusters go bad first.
func bulkheadRun(ctx context.Context, c Config, o drill.Options, faulty bool, logf func(string, ...any)) (BulkheadRun, []BadCluster, []string, error) {
	run := BulkheadRun{Faulty: faulty}
	s, err := drill.NewSession(ctx, o)
	if err != nil {
		return run, nil, nil, err
	}
	defer func() { _ = s.Close() }()
	clusters := s.Clusters()
	if len(clusters) <= len(bulkheadFaults) {
		return run, nil, nil, fmt.Errorf("%d clusters: want more than the %d bad ones", len(clusters), len(bulkheadFaults))
	}
	measured := map[string]bool{}
	for _, cl := range clusters[len(bulkheadFaults):] {
		measured[cl.Name] = true
	}
	var bad []BadCluster
	var wg sync.WaitGroup
	var mu sync.Mutex
	if faulty {
		proxies := make([]*netproxy.Proxy, len(bulkheadFaults))
		for i, fault := range bulkheadFaults {
			p, _, err := s.ProxyCluster(ctx, clusters[i])
			if err != nil {
				return run, nil, nil, fmt.Errorf("proxy %s: %w", clusters[i].Name, err)
			}
			defer func() { _ = p.Close() }()
			proxies[i] = p
			bad = append(bad, BadCluster{Cluster: clusters[i].Name, Fault: fault})
		}
		at := time.Now()
		for i, fault := range bulkheadFaults {
			p := proxies[i]
			switch fault {
			case FaultBlackhole:
				p.Hold()
			case FaultTrickle:
				p.SetRate(1)
				p.Cut() // open connections go; new ones trickle
				p.Heal()
			case FaultHang:
				p.SetHangAfter(2 * time.Second)
				p.Cut()
				p.Heal()
			}
		}
		for i := range bad {
			wg.Go(func() {
				d, err := untilDisconnected(ctx, s.Client(), bad[i].Cluster, at, time.Minute)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					bad[i].Error = err.Error()
					return
				}
				bad[i].ConnectedFalseAfter = round(d.Seconds(), 2)
			})
		}
	}
	churn := &ReplicationChurn{Replicas: o.Replicas, Rate: c.BulkheadRate, Objects: c.BulkheadObjects}
	if err := churnLag(ctx, s, churn, clusters, measured); err != nil {
		return run, nil, nil, err
	}
	wg.Wait()
	run.Objects = churn.Objects * len(measured) / len(clusters)
	run.Rate, run.P50, run.P99, run.Max, run.Missing = churn.Rate, churn.P50, churn.P99, churn.Max, churn.Missing
	crashed := s.Crashed()
	logf("  %s: create -> copy in sync for the %d healthy clusters' sources (churn of %d at %.0f/s over all %d clusters): p50 %.3fs p99 %.3fs max %.3fs, %d not synced; crashed replicas: %v",
		map[bool]string{false: "every remote healthy", true: "3 bad remotes"}[faulty], len(measured), churn.Objects, churn.Rate, len(clusters), run.P50, run.P99, run.Max, run.Missing, crashed)
	for _, b := range bad {
		logf("    %s (%s): Connected=False after %.2fs %s", b.Cluster, b.Fault, b.ConnectedFalseAfter, b.Error)
	}
	return run, bad, crashed, nil
}

// untilDisconnected waits until RemoteCluster name says Connected=False
// and returns how long after at.
func untilDisconnected(ctx context.Context, c client.Client, name string, at time.Time, timeout time.Duration) (time.Duration, error) {
	var d time.Duration
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var rc v1alpha1.RemoteCluster
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &rc); err != nil {
			return false, nil
		}
		if cond := meta.FindStatusCondition(rc.Status.Conditions, v1alpha1.ConditionConnected); cond != nil && cond.Status == metav1.ConditionFalse {
			d = time.Since(at)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return 0, errors.New("still Connected after " + timeout.String())
	}
	return d, nil
}
