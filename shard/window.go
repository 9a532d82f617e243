package shard

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
)

// The hand-over window paces planned hand-overs (Options.HandoverWindow).
// Let go of all at once, a successor's clusters queue behind its spawns,
// and each waits for the spawns before it: the gap without a manager grows
// with the number of clusters moved. Within the window, the releasing
// replica lets go of a cluster for a successor only while fewer than
// HandoverWindow it let go of are not yet running there; the others keep
// running here, under this replica's Lease, until their turn. A cluster
// thus waits for its own drain, stop, Lease transfer and spawn, not for
// the whole queue. The order of drain, stop and release (rule 3) is the
// same; only when each cluster's hand-over starts changes.

// letGo is a cluster this replica hands over, or let go of, whose new
// manager it has not yet seen running.
type letGo struct {
	// to is the successor the ring named (a replica name).
	to string
	// released is when the Lease was released (zero before, and when it
	// was abandoned instead).
	released time.Time
}

// windowShares divides each successor's window among the live replicas
// that hold clusters the ring now assigns to it (on a scale-out every old
// owner hands clusters to the new replica at once) and returns this
// replica's share of each (windowShare): the successor has the window
// spawning, not that many per releaser.
func (c *Coordinator) windowShares(o *reading, p *plan) map[string]int {
	from := map[string]map[string]bool{}
	for n, to := range p.assign {
		h := holderOf(o.leases[ClusterLeaseName(n)])
		if to == "" || h == "" || !o.live[h] || HolderName(h) == to {
			continue
		}
		if from[to] == nil {
			from[to] = map[string]bool{}
		}
		from[to][HolderName(h)] = true
	}
	shares := make(map[string]int, len(from))
	for to, hs := range from {
		shares[to] = windowShare(c.o.HandoverWindow, slices.Collect(maps.Keys(hs)), c.o.Identity)
	}
	return shares
}

// windowShare is self's share of a window among releasers (the replicas
// handing clusters to one successor): the window divided evenly, one more
// for the first window mod len(releasers) of them in name order, and at
// least 1 so that no releaser stalls. Every releaser computes the same
// division from the same Leases, so the shares add up to the window (to
// len(releasers) when that is more). Rounding every share up instead let
// a window of 4 over 3 old owners put 6 spawns on the new replica at once.
func windowShare(window int, releasers []string, self string) int {
	if len(releasers) == 0 {
		return max(1, window)
	}
	sorted := slices.Sorted(slices.Values(releasers))
	i, found := slices.BinarySearch(sorted, self)
	share := window / len(sorted)
	if found && i < window%len(sorted) {
		share++
	}
	return max(1, share)
}

// windowAllows reports whether one more cluster may be handed over to
// successor to now, this replica's share of its window being share (0: the
// whole window). A cluster with no successor (deleted, or no replica left
// on the ring) is not paced.
func (c *Coordinator) windowAllows(to string, share int) bool {
	if to == "" || c.o.HandoverWindow < 0 || c.windowLifted.Load() {
		return true
	}
	if share <= 0 {
		share = c.o.HandoverWindow
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, g := range c.letGo {
		if g.to == to {
			n++
		}
	}
	return n < share
}

// lettingGo records that the hand-over of name to successor to begins.
func (c *Coordinator) lettingGo(name, to string) {
	if to == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.letGo[name] = letGo{to: to}
	metrics.HandoverWindow.Set(float64(len(c.letGo)))
}

// releasedLease records that the Lease of name was released now: the
// window's timeout counts from here.
func (c *Coordinator) releasedLease(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.letGo[name]; ok {
		g.released = c.o.Clock.Now()
		c.letGo[name] = g
	}
}

// retire drops from the window, on a pass's reading, the clusters whose new
// holder marks its manager running, whose Lease is gone or ours again,
// whose hand-over ended without a release (lost, or abandoned: the
// successor waits a lease duration for those), and those released longer
// than HandoverWindowTimeout ago, counted.
func (c *Coordinator) retire(leases map[string]*coordinationv1.Lease, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, g := range c.letGo {
		l := leases[ClusterLeaseName(name)]
		h := holderOf(l)
		st := c.clusters[name]
		handing := st != nil && (st.phase == phaseDraining || st.phase == phaseReleasing)
		switch {
		// Ours again only once acquired again: right after the release a
		// cached reading may still show the Lease as ours.
		case l == nil, h == c.o.self && st != nil && st.phase == phaseOwned:
		case h != "" && h != c.o.self && l.Annotations[v1alpha1.ManagerRunningAnnotation] == h:
		case g.released.IsZero() && !handing:
		case !g.released.IsZero() && now.Sub(g.released) > c.o.HandoverWindowTimeout:
			c.log.Info("The successor did not show the cluster's manager running within the hand-over window timeout; handing over the next one without it",
				"cluster", name, "successor", g.to, "holder", h, "timeout", c.o.HandoverWindowTimeout)
			metrics.HandoverWindowTimeouts.Inc()
		default:
			continue
		}
		delete(c.letGo, name)
	}
	metrics.HandoverWindow.Set(float64(len(c.letGo)))
}

// markRunning marks the cluster's Lease as running a manager here, for the
// replica that let go of it (its window), once per acquisition. It is a
// JSON patch that first tests the version our acquisition wrote (and the
// holder), so it never lands on a Lease changed since: held by another
// process, released, or taken again in a later tenure. A failure only slows
// that replica's next hand-over (its window times out), so it is not
// retried.
func (c *Coordinator) markRunning(name, written string) {
	if written == "" {
		return
	}
	patch, err := json.Marshal([]map[string]string{
		{"op": "test", "path": "/metadata/resourceVersion", "value": written},
		{"op": "test", "path": "/spec/holderIdentity", "value": c.o.Identity},
		{"op": "test", "path": "/metadata/annotations/" + jsonPointerEscape(v1alpha1.IncarnationAnnotation), "value": c.o.Incarnation},
		{"op": "add", "path": "/metadata/annotations/" + jsonPointerEscape(v1alpha1.ManagerRunningAnnotation), "value": c.o.self},
	})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.RenewDeadline)
	defer cancel()
	l := &coordinationv1.Lease{ObjectMeta: leaseMeta(c.o.Namespace, ClusterLeaseName(name))}
	err = c.o.Client.Patch(ctx, l, client.RawPatch(types.JSONPatchType, patch))
	c.countWrite("patch", "cluster")
	if err != nil {
		c.log.V(1).Info("Cannot mark the cluster Lease as running its manager; the previous owner's hand-over window times out instead", "cluster", name, "error", err.Error())
	}
}

// jsonPointerEscape escapes a map key for a JSON pointer (RFC 6901).
var jsonPointerEscape = strings.NewReplacer("~", "~0", "/", "~1").Replace
