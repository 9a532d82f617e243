package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/clustershard/clustershard/shard"
	"github.com/clustershard/clustershard/tools/drill"
)

const mib = 1 << 20

// memory measures scenario 4: the RSS of one replica owning n idle clusters
// (each remote manager watching the replicated kind in its own namespace of
// one shared remote API server) for every n of sizes, the slope in MiB per
// cluster, and the cold start of r replicas over m clusters.
func memory(ctx context.Context, base drill.Options, sizes []int, r, m int, idle time.Duration, profileDir string, logf func(string, ...any)) (*Memory, error) {
	res := &Memory{ColdStartR: r, ColdStartM: m, Idle: idle.String()}
	var xs, ys, gs []float64
	var heaps, routines []map[string]float64
	base.Profile = true
	for i, n := range sizes {
		o := base
		o.Replicas, o.Remotes, o.ClustersPerRemote, o.ObjectsPerCluster = 1, 1, n, 0
		s, err := drill.NewSession(ctx, o)
		if err != nil {
			return res, fmt.Errorf("%d clusters: %w", n, err)
		}
		sleep(ctx, idle) // idle: caches synced, start-up garbage collected
		rss, err := s.RSS()
		g, gerr := s.Gauges(ctx, "go_goroutines")
		heap, routine, perr := idleProfiles(ctx, s, n, i == len(sizes)-1, profileDir)
		if perr != nil {
			logf("  %d clusters: no profile (%v)", n, perr)
		}
		if err == nil && i == 0 {
			// The floor, on this session's idle remote API server.
			res.Floor, err = bareFloor(ctx, s.RemoteConfig(0), m)
			if err == nil {
				logf("  bare-manager floor: %d managers synced in %.2fs; per manager %.2f ms CPU (API servers and etcd %.2f ms), %.1f goroutines, %.3f MiB heap",
					m, res.Floor.Seconds, res.Floor.CPUPerManagerMs, res.Floor.APIPerManagerMs, res.Floor.GoroutinesPerMgr, res.Floor.HeapMiBPerManager)
			}
		}
		_ = s.Close()
		if err != nil {
			return res, err
		}
		v := float64(rss[drill.ReplicaID(0)]) / mib
		p := MemoryPoint{Clusters: n, RSSMiB: round(v, 1)}
		if gerr == nil {
			p.Goroutines = g[drill.ReplicaID(0)]
		}
		res.Points = append(res.Points, p)
		xs, ys, gs = append(xs, float64(n)), append(ys, v), append(gs, p.Goroutines)
		heaps, routines = append(heaps, heap), append(routines, routine)
		logf("  1 replica owning %d clusters: RSS %.1f MiB, %.0f goroutines", n, v, p.Goroutines)
	}
	res.MiBPerCluster = round(slope(xs, ys), 3)
	res.GoroutinesPerCluster = round(slope(xs, gs), 1)
	if !slices.ContainsFunc(heaps, isNil) && !slices.ContainsFunc(routines, isNil) {
		res.HeapKiBPerCluster = slopes(xs, heaps, 1.0/1024, 1)
		res.GoroutinesPerClusterBy = slopes(xs, routines, 1, 2)
	}

	o := base
	o.Replicas, o.Remotes, o.ClustersPerRemote, o.ObjectsPerCluster = r, 2, m/2, 0
	s, err := drill.NewSession(ctx, o)
	if err != nil {
		return res, fmt.Errorf("cold start: %w", err)
	}
	defer func() { _ = s.Close() }()
	res.ColdAllOwned = round(s.AllOwned().Seconds(), 3)
	res.ColdAllRunning = round(s.StartUp().Seconds(), 3)
	mv := s.ColdStartMoves()
	res.ColdMoved, res.ColdMovedRunning = &mv.Moved, &mv.Running
	var replicaCPU float64
	for _, pid := range s.PIDs() {
		if t, ok := procTicks(pid); ok {
			replicaCPU += t
		}
	}
	res.ColdReplicaCPUPerSpawnMs = round(1000*replicaCPU/float64(m), 2)
	rss, err := s.RSS()
	if err != nil {
		return res, err
	}
	for _, id := range slices.Sorted(maps.Keys(rss)) {
		res.ColdStartRSSMiB = append(res.ColdStartRSSMiB, round(float64(rss[id])/mib, 1))
	}
	logf("  cold start R=%d M=%d: all owned after %.2fs, all managers running after %.2fs; RSS %v MiB; replica CPU per spawn %.2f ms; %d clusters changed hands, %d after their manager started",
		r, m, res.ColdAllOwned, res.ColdAllRunning, res.ColdStartRSSMiB, res.ColdReplicaCPUPerSpawnMs, mv.Moved, mv.Running)
	t, err := takeOverMemory(ctx, s, idle)
	if err != nil {
		return res, fmt.Errorf("take-over memory: %w", err)
	}
	res.TakeOver = t
	logf("  SIGKILL take-over of %d clusters in %.2fs: survivors' RSS %v MiB idle before, peak %v MiB (%.2f×)", t.Moved, t.Seconds, t.SteadyMiB, t.PeakMiB, t.PeakRatio)
	_ = s.Close()
	// The same cold start again, its replicas' CPU profiled from their
	// start: a run of its own, because the profiler slows a replica
	// owning many clusters (its figures above are unprofiled).
	o.ProfileCPU = true
	p, err := profiledColdStart(ctx, o, m, profileDir)
	if err != nil {
		logf("  profiled cold start: %v", err)
		return res, nil
	}
	res.ColdProfile = p
	logf("  profiled cold start: every manager running after %.2fs, replica CPU per spawn %.2f ms (profiler included)", p.AllRunning, p.CPUPerSpawnMs)
	return res, nil
}

// profiledColdStart runs the cold start of o with CPU profiles and breaks
// the replicas' CPU over it down by component.
func profiledColdStart(ctx context.Context, o drill.Options, m int, dir string) (*ColdProfile, error) {
	s, err := drill.NewSession(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() { _ = s.Close() }()
	p := &ColdProfile{AllRunning: round(s.StartUp().Seconds(), 3)}
	var cpu float64
	for _, pid := range s.PIDs() {
		if t, ok := procTicks(pid); ok {
			cpu += t
		}
	}
	p.CPUPerSpawnMs = round(1000*cpu/float64(m), 2)
	if p.PerSpawn, err = coldStartCPU(s, m, dir); err != nil {
		return nil, err
	}
	return p, nil
}

// takeOverMemory SIGKILLs the last replica of s once the others are idle
// and samples the survivors' RSS every 50 ms until every cluster runs on a
// live replica again, and two seconds more (what the new managers' first
// syncs leave behind).
func takeOverMemory(ctx context.Context, s *drill.Session, idle time.Duration) (*TakeOverMemory, error) {
	sleep(ctx, idle)
	ids := s.LiveIDs()
	victim := ids[len(ids)-1]
	pids := s.PIDs()
	holders, err := s.Holders(ctx)
	if err != nil {
		return nil, err
	}
	t := &TakeOverMemory{}
	for _, h := range holders {
		if shard.HolderName(h) == victim {
			t.Moved++
		}
	}
	survivors := ids[:len(ids)-1]
	steady := make([]int64, len(survivors))
	peak := make([]int64, len(survivors))
	for i, id := range survivors {
		if steady[i], err = drill.ProcessRSS(pids[id]); err != nil {
			return nil, err
		}
		peak[i] = steady[i]
	}
	sctx, stop := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			for i, id := range survivors {
				if v, err := drill.ProcessRSS(pids[id]); err == nil && v > peak[i] {
					peak[i] = v
				}
			}
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	killed := s.Kill(victim)
	err = s.Settle(ctx, 5*time.Minute)
	t.Seconds = round(time.Since(killed).Seconds(), 2)
	sleep(ctx, 2*time.Second)
	stop()
	<-sampled
	if err != nil {
		return nil, err
	}
	for i := range survivors {
		t.SteadyMiB = append(t.SteadyMiB, round(float64(steady[i])/mib, 1))
		t.PeakMiB = append(t.PeakMiB, round(float64(peak[i])/mib, 1))
		if r := float64(peak[i]) / float64(steady[i]); r > t.PeakRatio {
			t.PeakRatio = round(r, 3)
		}
	}
	return t, nil
}

func isNil(m map[string]float64) bool { return m == nil }
