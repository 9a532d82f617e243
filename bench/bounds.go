package bench

import (
	"fmt"
)

// bounds prints, for each target of the run that was missed, what bounds
// the figure, computed from the run's own measurements: the CPU the work
// needs against the machine's cores, or the queue of spawns against their
// concurrency.
func bounds(p func(string, ...any), r *Results) {
	p("## What bounds the missed targets")
	p("")
	p("Computed from this file's own measurements (CPU attribution by process class, spawn steps), on this machine's %d CPUs.", r.Machine.CPUs)
	p("")
	cpus := float64(max(r.Machine.CPUs, 1))
	for _, h := range r.Handover {
		if h.Met || h.Baseline || h.Fault == "SIGKILL" || h.Moved == 0 {
			continue
		}
		var spawnMs float64
		for _, s := range h.Steps {
			spawnMs += s.MeanMs
		}
		c := h.CPUPerSpawnMs
		perCluster := c[classReplicas] + c[classAPIServers] + c[classEtcd]
		machine := perCluster * float64(h.Moved) / 1000 / cpus
		line := fmt.Sprintf("- **Hand-over, %s** (p99 %.2f s against %s): each of the %d moved clusters cost %.0f ms of CPU (replicas %.0f, API servers %.0f, etcd %.0f), %.1f s of this machine's %d CPUs in all",
			h.Fault, h.P99, h.Target, h.Moved, perCluster, c[classReplicas], c[classAPIServers], c[classEtcd], machine, r.Machine.CPUs)
		if h.Span > 0 {
			line += fmt.Sprintf(", against %.1f s for the whole hand-over: the cores were busy about %.0f%% of it", h.Span, 100*min(machine/h.Span, 1))
		}
		line += fmt.Sprintf(". The hand-over window keeps a few spawns per successor on their way, and each (%.0f ms: the sum of the step means above) shares the cores with them and with the replicas' other work", spawnMs)
		if gap := 1000*h.P50 - spawnMs; gap > 0 {
			line += fmt.Sprintf("; the other %.0f ms of the median gap are the Lease transfer (release, watch, acquisition) and the reconcile's queue before the spawn", gap)
		}
		p("%s. A smaller gap at this size needs less CPU per spawn or fewer spawns at once (`--handover-window`, at the price of a longer hand-over).", line)
	}
	for _, h := range r.Handover {
		if h.Met || h.Baseline || h.Fault != "SIGKILL" {
			continue
		}
		p("- **Take-over after SIGKILL** (max %.2f s against %s): the survivors wait out the dead replica's membership (the lease duration by their own clocks, plus the retry period that notices it), then spawn %d clusters as above.", h.Max, h.Target, h.Moved)
	}
	if m := r.Memory; m != nil {
		if m.ColdAllRunning > targetAllRunning && m.ColdReplicaCPUPerSpawnMs > 0 {
			need := m.ColdReplicaCPUPerSpawnMs * float64(m.ColdStartM) / 1000 / cpus
			p("- **Cold start, every manager running** (%.1f s against ≤ %.0f s): the replicas alone spent %.1f ms of CPU per spawn; %d spawns on %.0f CPUs need at least %.1f s of the whole machine, before the API servers' share. Meeting %.0f s needs at most %.0f ms per spawn with nothing else running.",
				m.ColdAllRunning, targetAllRunning, m.ColdReplicaCPUPerSpawnMs, m.ColdStartM, cpus, need, targetAllRunning, targetAllRunning*cpus*1000/float64(m.ColdStartM))
		}
		if m.MiBPerCluster > targetMiBPerClstr {
			line := "- **Memory per idle cluster** (%.2f MiB against ≤ %.0f MiB, %.0f goroutines each)"
			args := []any{m.MiBPerCluster, targetMiBPerClstr, m.GoroutinesPerCluster}
			if f := m.Floor; f != nil && len(m.HeapKiBPerCluster) > 0 {
				var heap float64
				top := m.HeapKiBPerCluster[0]
				for _, c := range m.HeapKiBPerCluster {
					heap += c.Value
					if c.Value > top.Value {
						top = c
					}
				}
				line += ": a bare manager of the floor holds %.2f MiB of heap and %.0f goroutines; a replica's cluster holds %.2f MiB of heap (the table by component above; the largest, %s, %.0f KiB) and %.0f goroutines more than the floor; the rest of its RSS is the runtime's spans, stacks and pages not returned"
				args = append(args, f.HeapMiBPerManager, f.GoroutinesPerMgr, heap/1024, top.Component, top.Value, m.GoroutinesPerCluster-f.GoroutinesPerMgr)
			} else if f != nil {
				line += ": a bare manager of the floor holds %.2f MiB of heap and %.0f goroutines; a replica's cluster holds %.2f MiB and %.0f goroutines more, not broken down by component in this run"
				args = append(args, f.HeapMiBPerManager, f.GoroutinesPerMgr, m.MiBPerCluster-f.HeapMiBPerManager, m.GoroutinesPerCluster-f.GoroutinesPerMgr)
			}
			p(line+".", args...)
		}
		if t := m.TakeOver; t != nil && t.PeakRatio > targetTakeOverPeak && len(t.SteadyMiB) > 0 {
			var idle float64
			for _, v := range t.SteadyMiB {
				idle += v
			}
			idle /= float64(len(t.SteadyMiB))
			grown := idle + float64(t.Moved)/float64(len(t.SteadyMiB))*m.MiBPerCluster
			p("- **Peak RSS during a take-over** (%.2f× against ≤ %.1f×): each survivor takes %d more clusters, so its idle RSS alone grows from %.0f MiB to about %.0f MiB (%.2f×, at %.2f MiB per cluster); the rest of the peak is the new caches' initial lists and garbage not yet collected.",
				t.PeakRatio, targetTakeOverPeak, t.Moved/len(t.SteadyMiB), idle, grown, grown/idle, m.MiBPerCluster)
		}
	}
	for _, rep := range []*Replication{r.Replication, r.LatencyReplication} {
		if rep == nil || len(rep.Runs) < 2 || rep.Runs[1].Window == nil {
			continue
		}
		w := rep.Runs[1].Window
		var total float64
		for _, ms := range w.CPUPerObjectMs {
			total += ms
		}
		if total == 0 {
			continue
		}
		ceiling := cpus * 1000 / total
		where := "on local remotes"
		if rep.RemoteLatencyMs > 0 {
			where = "with the remotes a WAN away"
		}
		p("- **Replication %s** (R = 3 once every manager ran: %.0f objects/s): every object cost %.1f ms of CPU over all processes (replicas %.1f, API servers %.1f, etcd %.1f, harness %.1f), so %.0f CPUs top out near %.0f objects/s whatever the number of replicas; R = 1 already reaches %.0f objects/s, so R = 3 over R = 1 is bound by the cores (%.2f×). 150 objects/s needs at most %.1f ms per object.",
			where, w.PerSec, total, w.CPUPerObjectMs[classReplicas], w.CPUPerObjectMs[classAPIServers], w.CPUPerObjectMs[classEtcd], w.CPUPerObjectMs[classHarness],
			cpus, ceiling, rep.Runs[0].Window.PerSec, rep.WindowSpeedUp, cpus*1000/150)
	}
	p("")
}
