package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/tools/drill"
)

// handovers measures scenario 2 on real replica processes: per moved
// cluster, the time with no remote manager running, for a SIGTERM, a
// scale-out by one replica and a SIGKILL.
func handovers(ctx context.Context, o drill.Options, logf func(string, ...any)) ([]Handover, error) {
	s, err := drill.NewSession(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() { _ = s.Close() }()
	m := len(s.Clusters())
	logf("  %d replicas own %d clusters after %v, all managers running after %v", o.Replicas, m, s.AllOwned().Round(time.Millisecond), s.StartUp().Round(time.Millisecond))
	lease := o.LeaseDuration
	var out []Handover
	var stepsBefore map[string]map[string]drill.Histogram
	var cpuBefore cpuReading
	mark := func() {
		cpuBefore = cpuSeconds()
		var err error
		if stepsBefore, err = s.ScrapeHistograms(ctx, spawnSteps, "step"); err != nil {
			logf("  cannot scrape the spawn steps: %v", err)
		}
	}
	record := func(fault string, clusters []string, since time.Time, target time.Duration, p99 bool) error {
		if err := s.Settle(ctx, lease+time.Minute); err != nil {
			return fmt.Errorf("%s: %w", fault, err)
		}
		cpu := cpuSince(cpuBefore)
		after, err := s.ScrapeHistograms(ctx, spawnSteps, "step")
		if err != nil {
			logf("  cannot scrape the spawn steps: %v", err)
		}
		gaps, err := s.Gaps(clusters, since)
		if err != nil {
			return err
		}
		h := Handover{Fault: fault, Clusters: m, Lease: lease.String(), Moved: len(clusters)}
		for _, c := range clusters {
			if g, ok := gaps[c]; ok {
				h.Gaps = append(h.Gaps, round(g.Seconds(), 4))
			}
		}
		h.P50, h.P99, h.Max = quantile(h.Gaps, 0.5), quantile(h.Gaps, 0.99), quantile(h.Gaps, 1)
		if span, err := s.Span(clusters, since); err == nil {
			h.Span = round(span.Seconds(), 3)
		}
		h.Steps = stepMeans(stepsBefore, after)
		h.CPU, h.CPUPerSpawnMs = cpu, map[string]float64{}
		for class, sec := range cpu {
			h.CPUPerSpawnMs[class] = round(1000*sec/float64(max(len(clusters), 1)), 1)
		}
		if p99 {
			h.Target, h.Met = fmt.Sprintf("p99 ≤ %v", target), h.P99 <= target.Seconds()
		} else {
			h.Target, h.Met = fmt.Sprintf("max ≤ %v", target), h.Max <= target.Seconds()
		}
		if len(h.Gaps) != len(clusters) {
			h.Met = false
			h.Target += fmt.Sprintf(" (only %d of %d moved clusters measured)", len(h.Gaps), len(clusters))
		}
		logf("  %s: %d moved, gap p50 %.3fs p99 %.3fs max %.3fs, all moved after %.3fs (%s: met=%v)", fault, len(clusters), h.P50, h.P99, h.Max, h.Span, h.Target, h.Met)
		out = append(out, h)
		return nil
	}
	held := func(id string) ([]string, error) {
		h, err := s.Holders(ctx)
		var out []string
		for c, o := range h {
			if o == id {
				out = append(out, c)
			}
		}
		return out, err
	}

	// SIGTERM of the replica with the highest ordinal, then it comes back.
	victim := drill.ReplicaID(o.Replicas - 1)
	owned, err := held(victim)
	if err != nil {
		return out, err
	}
	mark()
	since := time.Now()
	if err := s.Term(victim); err != nil {
		return out, err
	}
	if err := record("SIGTERM", owned, since, time.Second, true); err != nil {
		return out, err
	}
	if err := s.StartReady(ctx, victim); err != nil {
		return out, err
	}
	if err := s.Settle(ctx, time.Minute); err != nil {
		return out, err
	}

	// Scale-out by one replica.
	before, err := s.Holders(ctx)
	if err != nil {
		return out, err
	}
	mark()
	since = time.Now()
	if err := s.StartReady(ctx, drill.ReplicaID(o.Replicas)); err != nil {
		return out, err
	}
	if err := s.Settle(ctx, time.Minute); err != nil {
		return out, err
	}
	after, err := s.Holders(ctx)
	if err != nil {
		return out, err
	}
	var movedOut []string
	for c, h := range after {
		if before[c] != h {
			movedOut = append(movedOut, c)
		}
	}
	slices.Sort(movedOut)
	if err := record(fmt.Sprintf("scale-out %d→%d", o.Replicas, o.Replicas+1), movedOut, since, time.Second, true); err != nil {
		return out, err
	}

	// SIGKILL of the replica holding the most clusters.
	h, err := s.Holders(ctx)
	if err != nil {
		return out, err
	}
	count := map[string]int{}
	for _, o := range h {
		count[o]++
	}
	victim = ""
	for id, n := range count {
		if victim == "" || n > count[victim] {
			victim = id
		}
	}
	owned, err = held(victim)
	if err != nil {
		return out, err
	}
	mark()
	since = time.Now()
	s.Kill(victim)
	return out, record("SIGKILL", owned, since, lease+2*time.Second, false)
}

// spawnSteps is the histogram of the steps of a spawn.
const spawnSteps = "clustershard_spawn_step_duration_seconds"

// stepMeans is the mean of each spawn step between two scrapes, summed over
// the processes (a process absent before counts from zero).
func stepMeans(before, after map[string]map[string]drill.Histogram) []Step {
	type acc struct {
		n   uint64
		sum float64
	}
	total := map[string]*acc{}
	for proc, steps := range after {
		for step, h := range steps {
			b := before[proc][step]
			if total[step] == nil {
				total[step] = &acc{}
			}
			total[step].n += h.Count - b.Count
			total[step].sum += h.Sum - b.Sum
		}
	}
	var out []Step
	for _, step := range []string{metrics.SpawnProbe, metrics.SpawnEpoch, metrics.SpawnInstall, metrics.SpawnStart} {
		if a := total[step]; a != nil && a.n > 0 {
			out = append(out, Step{Step: step, Count: a.n, MeanMs: round(1000*a.sum/float64(a.n), 1)})
		}
	}
	return out
}
