package shard

import (
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// TestPlanLosesAndHandsOver table-tests the decisions of one pass (plan,
// step.go) on a fake clock: which held clusters are lost (their Lease is no
// longer this process's), which are handed over (rule 3: the ring moved
// them, or their RemoteCluster is gone), and that a replica whose
// membership lapsed (rule 4) or that is leaving (rule 5) leaves the ring and
// takes nothing. A plan that kept a cluster whose Lease another process
// holds would let two replicas run it.
func TestPlanLosesAndHandsOver(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	probe := rulesCoordinator(t, clk)
	ring, err := NewRing([]string{"a", "b"}, probe.o.Ring)
	if err != nil {
		t.Fatal(err)
	}
	// mine stays with "a" on the ring {a, b}; moved goes to "b".
	var mine, moved string
	for i := 0; mine == "" || moved == ""; i++ {
		n := fmt.Sprintf("c%d", i)
		if ring.Assign([]string{n})[n] == "a" {
			mine = n
		} else {
			moved = n
		}
	}
	held := func(n, holder string) *coordinationv1.Lease {
		return lease(ClusterLeaseName(n), holder, "1", "label:"+v1alpha1.LeaseRoleLabel, "cluster", v1alpha1.ClusterAnnotation, n)
	}
	for _, tc := range []struct {
		name          string
		names         []string
		leases        []*coordinationv1.Lease
		live, leaving []string
		valid, self   bool // membership holds; this replica is leaving
		fenced        bool // writes fenced: within the grace after validity
		lose, handOff []string
		take          bool
		ringSize      int
	}{
		{name: "held, assigned here, Lease ours: kept", names: []string{mine}, leases: []*coordinationv1.Lease{held(mine, "a@p1")},
			live: []string{"a@p1", "b@p2"}, valid: true, take: true, ringSize: 2},
		{name: "Lease taken by another process: lost", names: []string{mine}, leases: []*coordinationv1.Lease{held(mine, "b@p2")},
			live: []string{"a@p1", "b@p2"}, valid: true, lose: []string{mine}, take: true, ringSize: 2},
		{name: "Lease taken by a later incarnation of this replica: lost", names: []string{mine}, leases: []*coordinationv1.Lease{held(mine, "a@p9")},
			live: []string{"a@p1", "b@p2"}, valid: true, lose: []string{mine}, take: true, ringSize: 2},
		{name: "Lease deleted: lost", names: []string{mine},
			live: []string{"a@p1", "b@p2"}, valid: true, lose: []string{mine}, take: true, ringSize: 2},
		{name: "ring moved it: handed over", names: []string{moved}, leases: []*coordinationv1.Lease{held(moved, "a@p1")},
			live: []string{"a@p1", "b@p2"}, valid: true, handOff: []string{moved}, take: true, ringSize: 2},
		{name: "RemoteCluster deleted: handed over", leases: []*coordinationv1.Lease{held(mine, "a@p1")},
			live: []string{"a@p1", "b@p2"}, valid: true, handOff: []string{mine}, take: true, ringSize: 2},
		{name: "the other member leaving: everything stays here", names: []string{mine, moved},
			leases: []*coordinationv1.Lease{held(mine, "a@p1"), held(moved, "a@p1")},
			live:   []string{"a@p1", "b@p2"}, leaving: []string{"b@p2"}, valid: true, take: true, ringSize: 1},
		{name: "within the grace after validity: keeps what it holds, takes nothing", names: []string{mine, moved},
			leases: []*coordinationv1.Lease{held(mine, "a@p1")},
			live:   []string{"a@p1", "b@p2"}, valid: true, fenced: true, ringSize: 2},
		{name: "own membership lapsed: off the ring, hands over, takes nothing", names: []string{mine},
			leases: []*coordinationv1.Lease{held(mine, "a@p1")},
			live:   []string{"b@p2"}, valid: false, handOff: []string{mine}, ringSize: 1},
		{name: "leaving: off the ring, hands over, takes nothing", names: []string{mine},
			leases: []*coordinationv1.Lease{held(mine, "a@p1")},
			live:   []string{"a@p1", "b@p2"}, leaving: []string{"a@p1"}, valid: true, self: true, handOff: []string{mine}, ringSize: 1},
		{name: "alone and lapsed: an empty ring hands everything over", names: []string{mine},
			leases: []*coordinationv1.Lease{held(mine, "a@p1")}, valid: false, handOff: []string{mine}, ringSize: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rulesCoordinator(t, clk)
			o := &reading{now: clk.Now(), names: tc.names, exists: map[string]bool{}, leases: map[string]*coordinationv1.Lease{},
				live: map[string]bool{}, leaving: map[string]bool{}, valid: tc.valid, writable: tc.valid && !tc.fenced, selfLeaving: tc.self}
			for _, n := range tc.names {
				o.exists[n] = true
			}
			for _, l := range tc.leases {
				o.leases[l.Name] = l
				c.clusters[LeaseCluster(l)] = &cluster{phase: phaseOwned}
			}
			for _, n := range []string{mine, moved} {
				if _, ok := c.clusters[n]; !ok && slices.Contains(tc.lose, n) {
					c.clusters[n] = &cluster{phase: phaseOwned} // held, its Lease gone
				}
			}
			for _, m := range tc.live {
				o.live[m] = true
			}
			for _, m := range tc.leaving {
				o.leaving[m] = true
			}
			p, err := c.plan(o)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(p.losses)
			slices.Sort(p.handovers)
			if !slices.Equal(p.losses, tc.lose) || !slices.Equal(p.handovers, tc.handOff) || p.take != tc.take {
				t.Errorf("plan: lose %v, hand over %v, take %v; want %v, %v, %v", p.losses, p.handovers, p.take, tc.lose, tc.handOff, tc.take)
			}
			if got := len(p.ring.Members()); got != tc.ringSize {
				t.Errorf("ring of %d members %v, want %d", got, p.ring.Members(), tc.ringSize)
			}
		})
	}
}
