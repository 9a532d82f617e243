package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Replication states of a source object, the values of ReplicatedObjects'
// state label.
const (
	StatePending         = "Pending"
	StateSynced          = "Synced"
	StateClusterNotReady = "ClusterNotReady"
	StateClusterNotFound = "ClusterNotFound"
	StateFailed          = "Failed"
	StateDeleting        = "Deleting"
)

var replicationStates = []string{StatePending, StateSynced, StateClusterNotReady, StateClusterNotFound, StateFailed, StateDeleting}

var (
	// ReplicatedObjects counts the source objects this replica replicates,
	// by kind and state, computed at scrape time from Objects.
	ReplicatedObjects = &objectsCollector{desc: prometheus.NewDesc(
		"clustershard_replicated_objects",
		"Source objects naming a remote cluster this replica owns, by kind and replication state (Pending, Synced, ClusterNotReady, ClusterNotFound, Failed, Deleting).",
		[]string{"kind", "state"}, nil)}
	// ReplicationLag is the time from this replica first seeing a generation
	// of a source to that generation being applied remotely.
	ReplicationLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "clustershard_replication_sync_lag_seconds",
		Help:    "Seconds from this replica first seeing a generation of a source object to its copy being applied in the remote cluster, by kind.",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
	}, []string{"kind"})
	// ReplicationErrors counts failed replication attempts by kind and reason.
	ReplicationErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clustershard_replication_errors_total",
		Help: "Failed replication attempts, by kind and reason (ClusterNotReady, ClusterNotFound, SyncFailed, APIError).",
	}, []string{"kind", "reason"})
)

// ReplicationErrorReasons are the reasons of ReplicationErrors.
var ReplicationErrorReasons = []string{StateClusterNotReady, StateClusterNotFound, "SyncFailed", "APIError"}

// Objects tracks the replication state of every source object of this
// process, by replica, kind and object key (namespace/name). The zero value is not usable: use the
// package's Tracker.
type Objects struct {
	mu      sync.Mutex
	entries map[objectKey]*objectEntry
	kinds   map[string]struct{} // reported even with no objects
}

type objectKey struct {
	replica, kind, object string
}

type objectEntry struct {
	state      string
	generation int64
	firstSeen  time.Time // when this replica first saw generation
	synced     bool      // generation's lag was observed
}

// Tracker is the process-wide object state tracker behind ReplicatedObjects.
var Tracker = &Objects{entries: map[objectKey]*objectEntry{}, kinds: map[string]struct{}{}}

// InitKind creates the series of kind at zero.
func InitKind(kind string) {
	for _, r := range ReplicationErrorReasons {
		ReplicationErrors.WithLabelValues(kind, r)
	}
	ReplicationLag.WithLabelValues(kind)
	Tracker.mu.Lock()
	Tracker.kinds[kind] = struct{}{}
	Tracker.mu.Unlock()
}

// Set records the state of one object (namespace/name) seen by replica at
// generation. A
// Synced state observes the lag of that generation once.
func (o *Objects) Set(replica, kind, object string, generation int64, state string) {
	now := time.Now()
	k := objectKey{replica, kind, object}
	o.mu.Lock()
	e := o.entries[k]
	if e == nil || e.generation != generation {
		e = &objectEntry{generation: generation, firstSeen: now}
		o.entries[k] = e
	}
	e.state = state
	observe := state == StateSynced && !e.synced
	if observe {
		e.synced = true
	}
	o.mu.Unlock()
	if observe {
		ReplicationLag.WithLabelValues(kind).Observe(now.Sub(e.firstSeen).Seconds())
	}
}

// Forget drops one object (deleted, or not this replica's to report).
func (o *Objects) Forget(replica, kind, object string) {
	o.mu.Lock()
	delete(o.entries, objectKey{replica, kind, object})
	o.mu.Unlock()
}

// ForgetReplica drops every object of replica (it stopped).
func (o *Objects) ForgetReplica(replica string) {
	o.mu.Lock()
	for k := range o.entries {
		if k.replica == replica {
			delete(o.entries, k)
		}
	}
	o.mu.Unlock()
}

// Counts returns the number of objects by kind and state.
func (o *Objects) Counts() map[string]map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]map[string]int{}
	for k := range o.kinds {
		out[k] = map[string]int{}
	}
	for k, e := range o.entries {
		if out[k.kind] == nil {
			out[k.kind] = map[string]int{}
		}
		out[k.kind][e.state]++
	}
	return out
}

type objectsCollector struct{ desc *prometheus.Desc }

// Describe implements prometheus.Collector.
func (c *objectsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector: every state of every known kind,
// zeros included.
func (c *objectsCollector) Collect(ch chan<- prometheus.Metric) {
	for kind, states := range Tracker.Counts() {
		for _, s := range replicationStates {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(states[s]), kind, s)
		}
	}
}
