package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/tools/drill"
	"github.com/clustershard/clustershard/tools/fleet"
)

// Config sizes a benchmark run. Defaults (Default) fit a 2-core, 24 GiB
// machine in about half an hour.
type Config struct {
	// Binary is the clustershard binary run as replicas.
	Binary string
	// Scenarios to run: writecost, handover, balance, memory, replication,
	// latency, bulkheads.
	Scenarios []string
	// WriteCostSizes are the fleet sizes of scenario 1; BaselineMax the
	// largest size the naive baseline runs at; Window the measuring window.
	WriteCostSizes []int
	BaselineMax    int
	Window         time.Duration
	// HandoverClusters is M of scenario 2; Lease the replicas' lease.
	HandoverClusters int
	Lease            time.Duration
	// HandoverBaseline runs scenario 2 a second time with the same build
	// and no hand-over window (--handover-window=0), the baseline of the
	// window's pacing.
	HandoverBaseline bool
	// ReplicaArgs are extra flags of every replica of every scenario; Dir,
	// when set, keeps the logs and journals of the scenario run there (an
	// empty folder: one scenario).
	ReplicaArgs []string
	Dir         string
	// ProfileDir receives the pprof profiles the memory scenario takes of
	// its replicas (idle heap and goroutines, the cold start's CPU); empty:
	// they are broken down in the results only.
	ProfileDir string
	// BalanceClusters, RingReplicas and LiveReplicas size scenario 3.
	BalanceClusters int
	RingReplicas    []int
	LiveReplicas    []int
	// MemorySizes, ColdStartClusters and Idle size scenario 4.
	MemorySizes       []int
	ColdStartClusters int
	Idle              time.Duration
	// ReplicationClusters × ReplicationObjects sources, and the churn.
	ReplicationClusters int
	ReplicationObjects  int
	ChurnRate           float64
	ChurnObjects        int
	// RemoteLatency is the round trip the latency scenario adds in front
	// of every remote API server (scenario 5 again); LatencyWorkers the
	// replicate workers of its second run, few enough that one replica
	// waits on round trips rather than on the machine's cores.
	RemoteLatency  time.Duration
	LatencyWorkers int
	// BulkheadClusters is M of scenario 6; BulkheadObjects sources are
	// created at BulkheadRate a second over all of them.
	BulkheadClusters int
	BulkheadObjects  int
	BulkheadRate     float64

	Out io.Writer
}

// AllScenarios are the scenario names, in the order they run.
var AllScenarios = []string{"writecost", "handover", "balance", "memory", "replication", "latency", "bulkheads"}

// Default is the configuration of `make bench`.
func Default(binary string) Config {
	return Config{
		Binary: binary, Scenarios: AllScenarios,
		WriteCostSizes: []int{100, 1000, 5000}, BaselineMax: 1000, Window: 30 * time.Second,
		HandoverClusters: 300, Lease: 4 * time.Second, HandoverBaseline: true,
		BalanceClusters: 1000, RingReplicas: []int{3, 5, 10}, LiveReplicas: []int{3, 5},
		MemorySizes: []int{0, 100, 500, 1000}, ColdStartClusters: 1000, Idle: 10 * time.Second,
		ReplicationClusters: 100, ReplicationObjects: 20, ChurnRate: 50, ChurnObjects: 1000,
		RemoteLatency: 50 * time.Millisecond, LatencyWorkers: 2,
		BulkheadClusters: 60, BulkheadObjects: 1200, BulkheadRate: 20,
	}
}

// Run runs the configured scenarios; a scenario that fails is recorded in
// Results.Errors and the others still run.
func Run(ctx context.Context, c Config) *Results {
	if c.Out == nil {
		c.Out = io.Discard
	}
	logf := func(format string, args ...any) { fmt.Fprintf(c.Out, format+"\n", args...) }
	// Thousands of in-process LeaderElectors log every attempt through klog.
	klog.SetLogger(logr.Discard())
	res := &Results{Date: time.Now().UTC(), Machine: ThisMachine()}
	start := time.Now()
	fail := func(scenario string, err error) {
		res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", scenario, err))
		logf("  %s FAILED: %v", scenario, err)
	}
	want := map[string]bool{}
	for _, s := range c.Scenarios {
		want[s] = true
	}
	drillOpts := drill.Options{Binary: c.Binary, LeaseDuration: c.Lease, Out: c.Out, Metrics: true, ReplicaArgs: c.ReplicaArgs, Dir: c.Dir}

	if want["writecost"] || want["balance"] {
		if err := ownershipScenarios(ctx, c, want, res, logf); err != nil {
			fail("writecost/balance", err)
		}
	}
	if want["handover"] {
		logf("==> 2. hand-over gaps at M=%d", c.HandoverClusters)
		o := drillOpts
		o.Replicas, o.Remotes, o.ClustersPerRemote = 3, 3, c.HandoverClusters/3
		h, err := handovers(ctx, o, logf)
		res.Handover = h
		if err != nil {
			fail("handover", err)
		}
		if c.HandoverBaseline {
			logf("==> 2. hand-over gaps at M=%d, baseline: the same build without the hand-over window (--handover-window=0)", c.HandoverClusters)
			o.ReplicaArgs = append(slices.Clone(o.ReplicaArgs), "--handover-window=0")
			h, err := handovers(ctx, o, logf)
			for i := range h {
				h[i].Baseline = true
			}
			res.Handover = append(res.Handover, h...)
			if err != nil {
				fail("handover baseline", err)
			}
		}
	}
	if want["memory"] {
		logf("==> 4. memory and cold start")
		m, err := memory(ctx, drillOpts, c.MemorySizes, 3, c.ColdStartClusters, c.Idle, c.ProfileDir, logf)
		res.Memory = m
		if err != nil {
			fail("memory", err)
		}
	}
	if want["replication"] {
		logf("==> 5. replication of %d objects over %d clusters", c.ReplicationClusters*c.ReplicationObjects, c.ReplicationClusters)
		res.Replication = replication(ctx, c, drillOpts, true, fail, logf)
	}
	if want["latency"] {
		logf("==> 5b. replication with every remote API server %v away", c.RemoteLatency)
		o := drillOpts
		o.RemoteLatency = c.RemoteLatency
		res.LatencyReplication = replication(ctx, c, o, false, fail, logf)
		res.LatencyReplication.RemoteLatencyMs = float64(c.RemoteLatency.Milliseconds())
		if c.LatencyWorkers > 0 {
			logf("==> 5c. the same with %d replicate workers per replica", c.LatencyWorkers)
			o.ReplicaArgs = append(slices.Clone(o.ReplicaArgs), fmt.Sprintf("--replicate-workers=%d", c.LatencyWorkers))
			res.LatencyBound = replication(ctx, c, o, false, fail, logf)
			res.LatencyBound.RemoteLatencyMs = float64(c.RemoteLatency.Milliseconds())
			res.LatencyBound.Workers = c.LatencyWorkers
		}
	}
	if want["bulkheads"] {
		logf("==> 6. bulkheads: %d clusters, 3 of them behind bad remotes", c.BulkheadClusters)
		b, err := bulkheads(ctx, c, drillOpts, logf)
		res.Bulkheads = b
		if err != nil {
			fail("bulkheads", err)
		}
	}
	res.Duration = time.Since(start).Round(time.Second).String()
	return res
}

// ownershipScenarios runs scenario 1 and the live part of scenario 3 on
// in-process coordinators against one management API server, and the ring
// simulation of scenario 3.
func ownershipScenarios(ctx context.Context, c Config, want map[string]bool, res *Results, logf func(string, ...any)) error {
	if want["balance"] {
		logf("==> 3. balance (ring simulation) at M=%d", c.BalanceClusters)
		for _, r := range c.RingReplicas {
			b, err := ringBalance(r, c.BalanceClusters)
			if err != nil {
				return err
			}
			logf("  ring R=%d: owned %v (max/mean %.3f), scale-out moved %d (ideal %.0f), scale-in moved %d (ideal %.0f)",
				r, b.Owned, b.MaxOverMean, b.MovedOut, b.IdealOut, b.MovedIn, b.IdealIn)
			res.Balance = append(res.Balance, b)
		}
		logf("==> 3. balance sweep: M in 1..2000, R in 1..10, the ring against the baseline")
		for _, s := range []BalanceSweep{balanceSweep("rendezvous", ringAssign), balanceSweep("baseline", baselineAssign)} {
			logf("  %s: over ceil(M/R)+1 on %d of %d sizes (worst +%d); moved/ideal total %.3f, median %.3f, p95 %.3f, max %.3f, max at M>=1000 %.3f; %v; %.2f ms per assignment at M=2000 R=10",
				s.Ring, s.OverBound, s.Sizes, s.WorstExcess, s.MovedOverIdealTotal, s.MovedOverIdealMedian, s.MovedOverIdealP95, s.MovedOverIdealMax, s.LargeMovedMax, s.Examples, s.AssignMs)
			res.BalanceSweep = append(res.BalanceSweep, s)
		}
	}
	cp, err := localcluster.Start(ctx, localcluster.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()
	cfg := cp.Management.Config
	cl, err := client.New(cfg, client.Options{Scheme: fleet.Scheme()})
	if err != nil {
		return err
	}
	if want["writecost"] {
		logf("==> 1. ownership write cost, R=3, window %v", c.Window)
		for _, m := range c.WriteCostSizes {
			wc, err := shardWriteCost(ctx, cfg, cl, 3, m, c.Window, logf)
			if err != nil {
				return err
			}
			if m <= c.BaselineMax {
				if wc.Baseline, err = baselineWriteCost(ctx, cfg, cl, 3, m, c.Window); err != nil {
					return err
				}
				if wc.Shard > 0 {
					wc.Ratio = round(wc.Baseline/wc.Shard, 1)
				}
				logf("  baseline M=%d: %.3f writes/s (%.1f× clustershard)", m, wc.Baseline, wc.Ratio)
			} else {
				wc.Note = fmt.Sprintf("baseline not run: %d LeaderElectors do not fit this machine next to the API server", 3*m)
			}
			res.WriteCost = append(res.WriteCost, wc)
		}
	}
	if want["balance"] {
		logf("==> 3. balance (live coordinators) at M=%d", c.BalanceClusters)
		for _, r := range c.LiveReplicas {
			b, err := liveBalance(ctx, cfg, cl, r, c.BalanceClusters, logf)
			if err != nil {
				return err
			}
			res.Balance = append(res.Balance, b)
		}
	}
	return nil
}

// replication syncs the same fleet with R = 1 and R = 3 (o's remote latency
// applied), with the churn after R = 3 when churn is set.
func replication(ctx context.Context, c Config, o drill.Options, churn bool, fail func(string, error), logf func(string, ...any)) *Replication {
	rep := &Replication{Objects: c.ReplicationClusters * c.ReplicationObjects, Clusters: c.ReplicationClusters}
	for _, r := range []int{1, 3} {
		o.Replicas, o.Remotes, o.ClustersPerRemote, o.ObjectsPerCluster = r, 2, c.ReplicationClusters/2, c.ReplicationObjects
		var ch *ReplicationChurn
		if churn && r == 3 && c.ChurnObjects > 0 {
			ch = &ReplicationChurn{Replicas: r, Rate: c.ChurnRate, Objects: c.ChurnObjects}
			rep.Churn = ch
		}
		run, err := replicationRun(ctx, o, ch, logf)
		if err != nil {
			fail(fmt.Sprintf("replication R=%d (remote latency %v)", r, o.RemoteLatency), err)
			break
		}
		rep.Runs = append(rep.Runs, run)
	}
	if len(rep.Runs) == 2 && rep.Runs[1].Synced > 0 {
		rep.SpeedUp = round(rep.Runs[0].Synced/rep.Runs[1].Synced, 2)
	}
	if len(rep.Runs) == 2 && rep.Runs[0].Window != nil && rep.Runs[1].Window != nil && rep.Runs[0].Window.PerSec > 0 {
		rep.WindowSpeedUp = round(rep.Runs[1].Window.PerSec/rep.Runs[0].Window.PerSec, 2)
	}
	return rep
}
