package shard

import (
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// Transfer is one change of a cluster's owner, as its new owner saw it.
type Transfer struct {
	// Cluster is the RemoteCluster.
	Cluster string
	// From is the previous holder (name@incarnation), "" for a first owner;
	// To is this process.
	From, To string
	// Reason is one of v1alpha1's Transfer reasons.
	Reason string
	// WithoutManager is how long no replica ran a manager for the cluster,
	// from the previous owner's stop (or its last sign of life) to the
	// first run of the new manager; 0 when unknown.
	WithoutManager time.Duration
}

// transferFrom says from whom and why an acquisition of cluster name takes
// its Lease l (as judged free): nil when this process held it already.
func (c *Coordinator) transferFrom(name string, l *coordinationv1.Lease) *Transfer {
	t := &Transfer{Cluster: name, To: c.o.self}
	holder := holderOf(l)
	switch {
	case l == nil:
		t.Reason = v1alpha1.TransferFirstOwner
	case holder == c.o.self:
		return nil
	case holder == "" && l.Annotations[v1alpha1.ReleasedByAnnotation] != "":
		t.From = l.Annotations[v1alpha1.ReleasedByAnnotation]
		t.Reason = v1alpha1.TransferRebalance
		if r := l.Annotations[v1alpha1.HandoverReasonAnnotation]; slices.Contains(releaseReasons, r) {
			t.Reason = r // never an arbitrary value: it becomes a metric label
		}
	case holder == "":
		t.Reason = v1alpha1.TransferFirstOwner // cleared by hand, or never held
	case l.Annotations[v1alpha1.AbandonedAnnotation] == "true":
		t.From, t.Reason = holder, v1alpha1.TransferAbandoned
	default:
		t.From, t.Reason = holder, v1alpha1.TransferCrashTakeover
	}
	if t.From == c.o.self {
		return nil // released by this process and taken back
	}
	return t
}

// releaseReasons are the reasons a holder writes when it releases a Lease.
var releaseReasons = []string{v1alpha1.TransferRebalance, v1alpha1.TransferDrain, v1alpha1.TransferShutdown, v1alpha1.TransferPin}

// Cordoned reports whether a membership Lease carries the cordon mark
// (v1alpha1.CordonedAnnotation, whatever its value).
func Cordoned(l *coordinationv1.Lease) bool {
	_, ok := l.Annotations[v1alpha1.CordonedAnnotation]
	return ok
}

// RingHash is the hash of a ring's members that replicas publish on their
// membership Lease (v1alpha1.RingLabel): 16 hex digits, "" for no members.
func RingHash(members []string) string {
	if len(members) == 0 {
		return ""
	}
	ms := slices.Clone(members)
	slices.Sort(ms)
	var b [8]byte
	sum := xxhash.Sum64String(strings.Join(ms, "\n"))
	for i := range b {
		b[i] = byte(sum >> (56 - 8*i))
	}
	return hex.EncodeToString(b[:])
}

// tracked counts the clusters this replica works on (owned, or being
// released or lost): the Leases it knows as its own.
func (c *Coordinator) tracked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, st := range c.clusters {
		if st.phase != phaseFree {
			n++
		}
	}
	return n
}

// Placement explains how the last pass placed cluster when its placement
// constrained it (pinned, avoiding replicas, or neither possible); "" when
// the ring placed it freely.
func (c *Coordinator) Placement(cluster string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.notes[cluster]
}

// publication is what a replica writes into its membership Lease's labels with
// every renewal.
type publication struct {
	ring    string
	tracked int
}

func (p publication) labels() map[string]string {
	return map[string]string{v1alpha1.RingLabel: p.ring, v1alpha1.TrackedLabel: strconv.Itoa(p.tracked)}
}
