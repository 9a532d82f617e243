package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/tools/drill"
	"github.com/clustershard/clustershard/tools/fleet"
)

// synced reports whether a source's copy is in sync with its generation.
func synced(o *examplev1alpha1.ExampleChaos) bool {
	c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionRemoteSynced)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == o.Generation
}

// replicationRun syncs every populated object with r replicas: the time from
// the replicas' start until every source reports its copy in sync.
func replicationRun(ctx context.Context, o drill.Options, churn *ReplicationChurn, logf func(string, ...any)) (ReplicationRun, error) {
	res := ReplicationRun{Replicas: o.Replicas}
	s, err := drill.NewSession(ctx, o)
	if err != nil {
		return res, err
	}
	defer func() { _ = s.Close() }()
	start := time.Now().Add(-s.StartUp())
	res.StartUp = round(s.StartUp().Seconds(), 3)
	total := len(s.Clusters()) * o.ObjectsPerCluster
	// The measured window opens now: every manager runs, some sources may
	// be in sync already.
	windowStart := time.Now()
	cpuBefore := cpuSeconds()
	reqBefore, rerr := s.Counters(ctx, "rest_client_requests_total", "host", "method")
	syncedBefore := countSynced(ctx, s)
	var left int
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		left = total - countSynced(ctx, s)
		return left == 0, nil
	})
	if err != nil {
		return res, fmt.Errorf("%d of %d objects not synced: %w", left, total, err)
	}
	res.Synced = round(time.Since(start).Seconds(), 3)
	res.PerSec = round(float64(total)/res.Synced, 1)
	if n := total - syncedBefore; n > 0 {
		secs := time.Since(windowStart).Seconds()
		w := &ReplicationWindow{Objects: n, Seconds: round(secs, 3), PerSec: round(float64(n)/secs, 1), CPU: cpuSince(cpuBefore), CPUPerObjectMs: map[string]float64{}}
		for class, sec := range w.CPU {
			w.CPUPerObjectMs[class] = round(1000*sec/float64(n), 2)
		}
		reqAfter, err := s.Counters(ctx, "rest_client_requests_total", "host", "method")
		if err == nil && rerr == nil {
			w.ManagementWrites, w.ManagementReads, w.RemoteWrites, w.RemoteReads = perObject(reqBefore, reqAfter, s.ManagementHosts(), n)
		}
		res.Window = w
		logf("  window of %d objects: CPU per object %v ms; per object the replicas sent %.2f writes and %.2f reads to the management API server, %.2f writes and %.2f reads to remotes",
			n, w.CPUPerObjectMs, w.ManagementWrites, w.ManagementReads, w.RemoteWrites, w.RemoteReads)
	}
	logf("  R=%d: %d objects over %d clusters synced %.2fs after the replicas' start (start-up %.2fs): %.0f objects/s",
		o.Replicas, total, len(s.Clusters()), res.Synced, res.StartUp, res.PerSec)
	if churn != nil {
		if err := churnLag(ctx, s, churn, s.Clusters(), nil); err != nil {
			return res, err
		}
		logf("  churn at %.0f objects/s with R=%d: %d objects, sync lag p50 %.3fs p99 %.3fs max %.3fs, %d not synced",
			churn.Rate, churn.Replicas, churn.Objects, churn.P50, churn.P99, churn.Max, churn.Missing)
	}
	return res, nil
}

// churnLag creates churn.Objects new sources at churn.Rate per second over
// clusters, in turn, and measures, with a watch on the management cluster,
// the time from each create to its copy being in sync, for the sources of
// the clusters measured (nil: all).
func churnLag(ctx context.Context, s *drill.Session, churn *ReplicationChurn, clusters []fleet.Cluster, measured map[string]bool) error {
	wc, err := client.NewWithWatch(s.Config(), client.Options{Scheme: fleet.Scheme()})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := wc.Watch(wctx, &examplev1alpha1.ExampleChaosList{})
	if err != nil {
		return err
	}
	defer w.Stop()
	var mu sync.Mutex
	created, done := map[string]time.Time{}, map[string]time.Time{}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			o, ok := ev.Object.(*examplev1alpha1.ExampleChaos)
			if !ok || !synced(o) {
				continue
			}
			now := time.Now()
			mu.Lock()
			if _, seen := done[o.Namespace+"/"+o.Name]; !seen {
				done[o.Namespace+"/"+o.Name] = now
			}
			mu.Unlock()
		}
	}()
	tick := time.NewTicker(time.Duration(float64(time.Second) / churn.Rate))
	defer tick.Stop()
	for i := range churn.Objects {
		<-tick.C
		cl := clusters[i%len(clusters)]
		o := &examplev1alpha1.ExampleChaos{
			ObjectMeta: metav1.ObjectMeta{Namespace: cl.Scope, Name: fmt.Sprintf("lag-%d", i)},
			Spec:       examplev1alpha1.ExampleChaosSpec{RemoteCluster: cl.Name, Action: "pod-kill", Duration: "30s"},
		}
		at := time.Now()
		if err := s.Client().Create(ctx, o); err != nil {
			return err
		}
		if measured != nil && !measured[cl.Name] {
			continue
		}
		mu.Lock()
		created[o.Namespace+"/"+o.Name] = at
		mu.Unlock()
	}
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		for k := range created {
			if _, ok := done[k]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
	mu.Lock()
	defer mu.Unlock()
	var lags []float64
	for k, at := range created {
		if t, ok := done[k]; ok {
			lags = append(lags, t.Sub(at).Seconds())
		} else {
			churn.Missing++
		}
	}
	churn.P50, churn.P99, churn.Max = round(quantile(lags, 0.5), 4), round(quantile(lags, 0.99), 4), round(quantile(lags, 1), 4)
	return nil
}

// countSynced is how many sources are in sync now (0 when they cannot be
// listed: the caller looks again).
func countSynced(ctx context.Context, s *drill.Session) int {
	var list examplev1alpha1.ExampleChaosList
	if err := s.Client().List(ctx, &list); err != nil {
		return 0
	}
	n := 0
	for i := range list.Items {
		if synced(&list.Items[i]) {
			n++
		}
	}
	return n
}

// perObject divides the requests sent between two readings of
// rest_client_requests_total (by "host|method") by n objects: writes and
// reads to the management API server (reached at the hosts of mgmt) and to
// the remotes.
func perObject(before, after map[string]float64, mgmt map[string]bool, n int) (mw, mr, rw, rr float64) {
	for key, v := range after {
		host, method, _ := strings.Cut(key, "|")
		d := v - before[key]
		write := method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE"
		read := method == "GET" || method == "LIST"
		switch {
		case mgmt[host] && write:
			mw += d
		case mgmt[host] && read:
			mr += d
		case write:
			rw += d
		case read:
			rr += d
		}
	}
	f := float64(n)
	return round(mw/f, 2), round(mr/f, 2), round(rw/f, 2), round(rr/f, 2)
}
