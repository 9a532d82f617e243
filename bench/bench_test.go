package bench_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/clustershard/clustershard/bench"
)

func init() { ctrllog.SetLogger(logr.Discard()) }

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Every scenario of `make bench` runs end to end at a tiny size, against
// real API servers and replica processes, and its results render into
// RESULTS.md and plots. (The figures at this size mean nothing; `make bench`
// measures.)
func TestSmokeRun(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "clustershard")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/clustershard").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	c := bench.Default(bin)
	c.WriteCostSizes, c.BaselineMax, c.Window = []int{20, 40}, 20, 3*time.Second
	c.HandoverClusters, c.HandoverBaseline = 6, false // the baseline is the same scenario again
	c.BalanceClusters, c.RingReplicas, c.LiveReplicas = 60, []int{3}, []int{2}
	c.MemorySizes, c.ColdStartClusters, c.Idle = []int{0, 4}, 6, time.Second
	c.ReplicationClusters, c.ReplicationObjects, c.ChurnRate, c.ChurnObjects = 4, 5, 20, 20
	c.BulkheadClusters, c.BulkheadObjects, c.BulkheadRate = 6, 12, 10
	c.ProfileDir = t.TempDir()
	c.Out = testWriter{t}
	res := bench.Run(t.Context(), c)
	if len(res.Errors) > 0 {
		t.Fatalf("scenarios failed: %v", res.Errors)
	}
	if len(res.WriteCost) != 2 || res.WriteCost[0].Baseline <= res.WriteCost[0].Shard || res.WriteCost[1].Baseline != 0 {
		t.Errorf("write cost: %+v", res.WriteCost)
	}
	if len(res.Handover) != 3 {
		t.Errorf("hand-over: %+v", res.Handover)
	}
	for _, h := range res.Handover {
		if h.Moved == 0 || len(h.Gaps) != h.Moved {
			t.Errorf("hand-over %s: %d moved, %d gaps measured", h.Fault, h.Moved, len(h.Gaps))
		}
	}
	if len(res.Balance) != 2 || res.Balance[1].Mode != "live" || res.Balance[1].MovedOut == 0 || res.Balance[1].MovedIn == 0 {
		t.Errorf("balance: %+v", res.Balance)
	}
	if len(res.BalanceSweep) != 2 || res.BalanceSweep[0].OverBound != 0 || res.BalanceSweep[0].Sizes == 0 {
		t.Errorf("balance sweep: %+v", res.BalanceSweep)
	}
	if m := res.Memory; m == nil || len(m.Points) != 2 || m.Points[0].RSSMiB <= 0 || m.ColdAllOwned <= 0 || len(m.ColdStartRSSMiB) != 3 {
		t.Errorf("memory: %+v", res.Memory)
	} else if to := m.TakeOver; to == nil || to.Moved == 0 || len(to.PeakMiB) != 2 || to.PeakRatio < 1 {
		t.Errorf("take-over memory: %+v", m.TakeOver)
	}
	if m := res.Memory; m != nil && (m.ColdProfile == nil || len(m.ColdProfile.PerSpawn) == 0 || len(m.HeapKiBPerCluster) == 0 || len(m.GoroutinesPerClusterBy) == 0) {
		t.Errorf("memory breakdowns by component: cpu %+v heap %v goroutines %v", m.ColdProfile, m.HeapKiBPerCluster, m.GoroutinesPerClusterBy)
	}
	for _, f := range []string{"cold-start-cpu.pb.gz", "idle-4-heap.pb.gz", "idle-4-goroutine.pb.gz"} {
		if fi, err := os.Stat(filepath.Join(c.ProfileDir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s: %v", f, err)
		}
	}
	if r := res.Replication; r == nil || len(r.Runs) != 2 || r.SpeedUp <= 0 || r.Churn == nil || r.Churn.Missing != 0 {
		t.Errorf("replication: %+v (churn %+v)", res.Replication, res.Replication.Churn)
	}
	if r := res.LatencyReplication; r == nil || len(r.Runs) != 2 || r.SpeedUp <= 0 || r.RemoteLatencyMs != 50 || r.Churn != nil {
		t.Errorf("replication with remotes 50 ms away: %+v", res.LatencyReplication)
	}
	if r := res.LatencyBound; r == nil || len(r.Runs) != 2 || r.SpeedUp <= 0 || r.Workers != 2 {
		t.Errorf("latency-bound replication: %+v", res.LatencyBound)
	}

	if b := res.Bulkheads; b == nil || len(b.Runs) != 2 || len(b.Bad) != 3 || b.P99Ratio <= 0 || len(b.Crashed) != 0 {
		t.Errorf("bulkheads: %+v", res.Bulkheads)
	} else {
		for _, bad := range b.Bad {
			if bad.Error != "" || bad.ConnectedFalseAfter <= 0 {
				t.Errorf("bad cluster %+v not shown Connected=False", bad)
			}
		}
	}

	dir := t.TempDir()
	plots, err := bench.Plots(res, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"writecost", "handover", "memory", "balance", "replication"} {
		if fi, err := os.Stat(filepath.Join(dir, plots[name])); err != nil || fi.Size() == 0 {
			t.Errorf("plot %s: %v", name, err)
		}
	}
	md := bench.Markdown(res, plots, "results/x.json")
	for _, s := range []string{"## 1. Ownership write cost", "## 2. Hand-over", "## 3. Balance", "## 4. Memory", "## 5. Replication", "## 5b. Replication with remote clusters 50 ms away", "## 5c.", "## 6. Bulkheads", "Take-over:", "| component | CPU per spawn |", "| component | heap per cluster |", "## What bounds the missed targets", "CPUs"} {
		if !strings.Contains(md, s) {
			t.Errorf("RESULTS.md lacks %q", s)
		}
	}
}
