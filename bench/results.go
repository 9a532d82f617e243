package bench

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// Results are one `make bench` run: every scenario with its baseline,
// measured on one machine in one run.
type Results struct {
	Date     time.Time `json:"date"`
	Machine  Machine   `json:"machine"`
	Duration string    `json:"duration"`

	WriteCost []WriteCost `json:"writeCost"`
	Handover  []Handover  `json:"handover"`
	Balance   []Balance   `json:"balance"`
	// BalanceSweep is scenario 3's sweep over every fleet size, for the ring
	// and for the baseline ring it replaced.
	BalanceSweep []BalanceSweep `json:"balanceSweep,omitempty"`
	Memory       *Memory        `json:"memory,omitempty"`
	Replication  *Replication   `json:"replication,omitempty"`
	// LatencyReplication is scenario 5 with every remote API server
	// behind a loopback proxy adding a WAN's round trip.
	LatencyReplication *Replication `json:"latencyReplication,omitempty"`
	// LatencyBound is LatencyReplication with few replicate workers per
	// replica, so that one replica is bound by round trips.
	LatencyBound *Replication `json:"latencyBound,omitempty"`
	// Bulkheads is scenario 6: healthy clusters next to bad remotes.
	Bulkheads *Bulkheads `json:"bulkheads,omitempty"`
	// Errors are scenarios that could not run, with why.
	Errors []string `json:"errors,omitempty"`
	// Reruns record scenarios measured again later into these results
	// (bench --update), with when and why.
	Reruns []string `json:"reruns,omitempty"`
}

// Merge replaces the scenarios of r that o measured (named in scenarios) by
// o's, and records the rerun.
func (r *Results) Merge(o *Results, scenarios []string, why string) {
	for _, s := range scenarios {
		switch s {
		case "writecost":
			r.WriteCost = o.WriteCost
		case "handover":
			r.Handover = o.Handover
		case "balance":
			r.Balance, r.BalanceSweep = o.Balance, o.BalanceSweep
		case "memory":
			r.Memory = o.Memory
		case "replication":
			r.Replication = o.Replication
		case "latency":
			r.LatencyReplication, r.LatencyBound = o.LatencyReplication, o.LatencyBound
		case "bulkheads":
			r.Bulkheads = o.Bulkheads
		}
	}
	kept := r.Errors[:0]
	for _, e := range r.Errors { // errors of the re-measured scenarios are superseded
		superseded := false
		for _, s := range scenarios {
			superseded = superseded || strings.HasPrefix(e, s)
		}
		if !superseded {
			kept = append(kept, e)
		}
	}
	r.Errors = append(kept, o.Errors...)
	r.Reruns = append(r.Reruns, fmt.Sprintf("%s re-measured on %s (%s): %s", strings.Join(scenarios, ", "),
		o.Date.Format("2006-01-02 15:04 UTC"), o.Duration, why))
}

// Machine describes where the run happened.
type Machine struct {
	CPUs     int     `json:"cpus"`
	MemGiB   float64 `json:"memGiB"`
	OS       string  `json:"os"`
	Go       string  `json:"go"`
	CPUModel string  `json:"cpuModel,omitempty"`
}

// WriteCost is scenario 1 at one size: steady-state ownership API writes
// per second of clustershard and of the naive baseline (one client-go
// LeaderElector per replica and cluster). Baseline is 0 when not run.
type WriteCost struct {
	Clusters   int     `json:"clusters"`
	Replicas   int     `json:"replicas"`
	Window     string  `json:"window"`
	Shard      float64 `json:"shardWritesPerSecond"`
	Baseline   float64 `json:"baselineWritesPerSecond"`
	Ratio      float64 `json:"ratio,omitempty"`
	ShardReady string  `json:"shardAllOwnedAfter"`
	Note       string  `json:"note,omitempty"`
}

// Handover is scenario 2 for one fault: per moved cluster, the time with no
// remote manager running.
type Handover struct {
	Fault    string    `json:"fault"`
	Clusters int       `json:"clusters"`
	Lease    string    `json:"leaseDuration"`
	Moved    int       `json:"moved"`
	Gaps     []float64 `json:"gapsSeconds"`
	P50      float64   `json:"p50"`
	P99      float64   `json:"p99"`
	Max      float64   `json:"max"`
	// Span is the whole hand-over: seconds from the fault until the last
	// moved cluster ran on its new owner (the window paces planned
	// hand-overs, so it exceeds the largest gap).
	Span float64 `json:"spanSeconds,omitempty"`
	// Baseline marks the run without the hand-over window.
	Baseline bool   `json:"baseline,omitempty"`
	Target   string `json:"target"`
	Met      bool   `json:"met"`
	// Steps is the mean time of each step of the spawns the receiving
	// replicas made during the hand-over (clustershard_spawn_step_duration_seconds).
	Steps []Step `json:"spawnSteps,omitempty"`
	// CPU is the CPU seconds each process class used from the fault until
	// every moved cluster ran again; CPUPerSpawnMs the same per moved cluster.
	CPU           map[string]float64 `json:"cpuSeconds,omitempty"`
	CPUPerSpawnMs map[string]float64 `json:"cpuPerSpawnMs,omitempty"`
}

// Name is the fault, and "no window" for the baseline.
func (h Handover) Name() string {
	if h.Baseline {
		return h.Fault + ", no window (baseline)"
	}
	return h.Fault
}

// Step is the mean duration of one spawn step over Count spawns.
type Step struct {
	Step   string  `json:"step"`
	Count  uint64  `json:"count"`
	MeanMs float64 `json:"meanMs"`
}

// Balance is scenario 3 for one R: owned clusters per replica and clusters
// moved when one replica joins and leaves, by ring simulation or live.
type Balance struct {
	Mode        string  `json:"mode"` // "ring" (simulated) or "live"
	Clusters    int     `json:"clusters"`
	Replicas    int     `json:"replicas"`
	MaxOverMean float64 `json:"maxOverMean"`
	Owned       []int   `json:"owned"`
	MovedOut    int     `json:"movedOnScaleOut"`
	IdealOut    float64 `json:"idealOnScaleOut"`
	MovedIn     int     `json:"movedOnScaleIn"`
	IdealIn     float64 `json:"idealOnScaleIn"`
}

// Memory is scenario 4: replica RSS against owned clusters, and cold start.
type Memory struct {
	Points          []MemoryPoint `json:"points"`
	Idle            string        `json:"idle"`
	MiBPerCluster   float64       `json:"mibPerCluster"`
	ColdStartR      int           `json:"coldStartReplicas"`
	ColdStartM      int           `json:"coldStartClusters"`
	ColdAllOwned    float64       `json:"coldStartAllOwnedSeconds"`
	ColdAllRunning  float64       `json:"coldStartAllRunningSeconds"`
	ColdStartRSSMiB []float64     `json:"coldStartRSSMiB"`
	// ColdMoved is how many clusters changed hands during the cold start;
	// ColdMovedRunning how many of them after their manager had started.
	ColdMoved        *int `json:"coldStartMoved,omitempty"`
	ColdMovedRunning *int `json:"coldStartMovedRunning,omitempty"`
	// ColdReplicaCPUPerSpawnMs is the replicas' CPU from their start until
	// every manager ran, per cluster; Floor the bare-manager floor measured
	// in the same run, to compare it with.
	ColdReplicaCPUPerSpawnMs float64 `json:"coldStartReplicaCPUPerSpawnMs,omitempty"`
	Floor                    *Floor  `json:"floor,omitempty"`
	// GoroutinesPerCluster is the slope of the replica's goroutines over
	// owned idle clusters.
	GoroutinesPerCluster float64 `json:"goroutinesPerCluster,omitempty"`
	// HeapKiBPerCluster and GoroutinesPerClusterBy break the idle cost per
	// cluster down by component: the slope of each component's in-use heap
	// (after a GC) and goroutines over the sizes, from the replica's pprof
	// profiles.
	HeapKiBPerCluster      []ComponentCost `json:"heapKiBPerClusterBy,omitempty"`
	GoroutinesPerClusterBy []ComponentCost `json:"goroutinesPerClusterBy,omitempty"`
	// ColdProfile is the same cold start run again with its replicas' CPU
	// profiled, broken down by component.
	ColdProfile *ColdProfile `json:"coldStartProfile,omitempty"`
	// TakeOver is the survivors' memory while they take over the clusters
	// of one SIGKILLed replica of the cold start's R.
	TakeOver *TakeOverMemory `json:"takeOver,omitempty"`
}

// ColdProfile is a cold start whose replicas' CPU was profiled from their
// start (the profiler's own cost included in its figures).
type ColdProfile struct {
	AllRunning    float64 `json:"allRunningSeconds"`
	CPUPerSpawnMs float64 `json:"replicaCPUPerSpawnMs"`
	// PerSpawn breaks the replicas' CPU down by component, in ms per
	// spawn: their CPU profiles from their start until every manager ran
	// (whole profile windows, so up to one window more).
	PerSpawn []ComponentCost `json:"perSpawnBy"`
}

// TakeOverMemory is the RSS of each surviving replica idle before a
// SIGKILL take-over (Steady) and its peak from the kill until every cluster
// runs again and a few seconds more (Peak), sampled every 50 ms.
type TakeOverMemory struct {
	Moved     int       `json:"movedClusters"`
	SteadyMiB []float64 `json:"steadyMiB"`
	PeakMiB   []float64 `json:"peakMiB"`
	// PeakRatio is the largest Peak/Steady of a survivor.
	PeakRatio float64 `json:"peakRatio"`
	Seconds   float64 `json:"takeOverSeconds"`
}

// MemoryPoint is one replica's RSS owning Clusters idle clusters.
type MemoryPoint struct {
	Clusters int     `json:"clusters"`
	RSSMiB   float64 `json:"rssMiB"`
	// Goroutines of the replica (go_goroutines).
	Goroutines float64 `json:"goroutines,omitempty"`
}

// Replication is scenario 5.
type Replication struct {
	Objects  int              `json:"objects"`
	Clusters int              `json:"clusters"`
	Runs     []ReplicationRun `json:"runs"`
	SpeedUp  float64          `json:"speedUp"`
	// WindowSpeedUp is R = 3 over R = 1 in objects per second once every
	// manager ran.
	WindowSpeedUp float64           `json:"windowSpeedUp,omitempty"`
	Churn         *ReplicationChurn `json:"churn,omitempty"`
	// RemoteLatencyMs is the round trip added in front of every remote
	// API server, 0 for none.
	RemoteLatencyMs float64 `json:"remoteLatencyMs,omitempty"`
	// Workers is the replicate workers per replica when not the default.
	Workers int `json:"replicateWorkers,omitempty"`
}

// ReplicationRun is the initial sync of every object by R replicas.
type ReplicationRun struct {
	Replicas int     `json:"replicas"`
	StartUp  float64 `json:"startUpSeconds"`
	Synced   float64 `json:"syncedSeconds"`
	PerSec   float64 `json:"objectsPerSecond"`
	// Window is what was measured from the moment every manager ran until
	// every source was in sync: the objects synced in it, the CPU seconds
	// of each process class, and the replicas' API requests.
	Window *ReplicationWindow `json:"window,omitempty"`
}

// ReplicationWindow is the cost of the objects synced in a measured window.
type ReplicationWindow struct {
	Objects int `json:"objects"`
	// Seconds the window lasted, and Objects per second in it: the
	// replication rate once every manager ran, start-up left out.
	Seconds float64 `json:"seconds,omitempty"`
	PerSec  float64 `json:"objectsPerSecond,omitempty"`
	// CPU is the CPU seconds used in the window by class (replicas,
	// apiServers, etcd, harness); CPUPerObjectMs the same per object.
	CPU            map[string]float64 `json:"cpuSeconds"`
	CPUPerObjectMs map[string]float64 `json:"cpuPerObjectMs"`
	// Requests per object the replicas sent, by API server (management,
	// remote) and kind (write: POST, PUT, PATCH, DELETE; read: GET, LIST).
	ManagementWrites float64 `json:"managementWritesPerObject"`
	ManagementReads  float64 `json:"managementReadsPerObject"`
	RemoteWrites     float64 `json:"remoteWritesPerObject"`
	RemoteReads      float64 `json:"remoteReadsPerObject"`
}

// ReplicationChurn is the sync lag under a steady creation rate.
type ReplicationChurn struct {
	Replicas int     `json:"replicas"`
	Rate     float64 `json:"objectsPerSecond"`
	Objects  int     `json:"objects"`
	P50      float64 `json:"p50Seconds"`
	P99      float64 `json:"p99Seconds"`
	Max      float64 `json:"maxSeconds"`
	Missing  int     `json:"notSynced"`
}

// ThisMachine describes the machine running the benchmark.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				var kb float64
				for _, f := range strings.Fields(v) {
					if n, err := parseFloat(f); err == nil {
						kb = n
						break
					}
				}
				m.MemGiB = kb / 1024 / 1024
			}
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return m
}

// Bulkheads is scenario 6: the same fleet and churn with every remote
// healthy, then with one cluster behind each bad remote.
type Bulkheads struct {
	Clusters int `json:"clusters"`
	// Runs are the healthy run, then the run with bad remotes.
	Runs []BulkheadRun `json:"runs"`
	// Bad are the bad clusters of the second run.
	Bad []BadCluster `json:"bad"`
	// P99Ratio is the healthy clusters' p99 lag with bad remotes over
	// without (target ≤ 1.1).
	P99Ratio float64 `json:"p99Ratio"`
	// ProbeBound is how soon a bad cluster must show Connected=False.
	ProbeBound float64 `json:"probeBoundSeconds"`
	// Crashed are replicas whose process ended by itself, in either run.
	Crashed []string `json:"crashed,omitempty"`
}

// BulkheadRun is the create-to-copy lag of the healthy clusters' sources.
type BulkheadRun struct {
	Faulty  bool    `json:"badRemotes"`
	Objects int     `json:"objectsMeasured"`
	Rate    float64 `json:"objectsPerSecond"`
	P50     float64 `json:"p50Seconds"`
	P99     float64 `json:"p99Seconds"`
	Max     float64 `json:"maxSeconds"`
	Missing int     `json:"notSynced"`
}

// BadCluster is a cluster whose remote went bad, and how soon it showed.
type BadCluster struct {
	Cluster             string  `json:"cluster"`
	Fault               string  `json:"fault"`
	ConnectedFalseAfter float64 `json:"connectedFalseAfterSeconds"`
	Error               string  `json:"error,omitempty"`
}
