package shard

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// RingOptions configure a Ring.
type RingOptions struct {
	// LoadFactor loosens the load bound of Assign. With 0 (the default) each
	// member gets at most ceil(M/R)+1 of M names over R members. Otherwise it
	// must be a finite number greater than 1, and a member gets at most
	// max(ceil(M/R)+1, ceil(LoadFactor*M/R)): a looser bound moves fewer names
	// when members come and go.
	LoadFactor float64
}

// Ring assigns names to a set of members by rendezvous hashing with bounded
// loads. It is immutable and safe for concurrent use once built.
//
// Every (name, member) pair has a score, a 64-bit hash of both; a name ranks
// the members by score. Without a load bound each name goes to its
// first-ranked member (Owner): a joining member takes only the names that rank
// it first, and a leaving member's names go each to its next choice, so
// nothing else moves. With the bound (Assign), the assignment is the
// name-optimal stable matching of names to members of equal capacity
// (Gale–Shapley deferred acceptance, members preferring the names that score
// them highest): each name goes to the best-ranked member it can have without
// displacing a name that scores that member higher. It is unique, so it does
// not depend on the order names are considered in, and every replica computes
// the same one from the same members and names.
type Ring struct {
	members    []string // sorted, unique
	seeds      []uint64 // hash of each member's name
	loadFactor float64
}

// NewRing builds a ring over members. Duplicate members are ignored and the
// order of members does not matter. It fails for invalid options or an empty
// member name.
func NewRing(members []string, opts RingOptions) (*Ring, error) {
	lf := opts.LoadFactor
	if lf != 0 && (!(lf > 1) || math.IsInf(lf, 1)) {
		return nil, fmt.Errorf("shard: LoadFactor must be 0 or a finite number greater than 1, got %v", lf)
	}
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	if len(ms) > 0 && ms[0] == "" {
		return nil, errors.New("shard: member name must not be empty")
	}
	seeds := make([]uint64, len(ms))
	for i, m := range ms {
		seeds[i] = xxhash.Sum64String(m)
	}
	return &Ring{members: ms, seeds: seeds, loadFactor: lf}, nil
}

// Members returns the members of the ring, sorted.
func (r *Ring) Members() []string {
	return slices.Clone(r.members)
}

// score is the rendezvous score of a name (by its hash) for member m: the
// SplitMix64 finaliser of both hashes, so that every member's scores are
// independent and uniform.
func (r *Ring) score(h uint64, m int) uint64 {
	z := h ^ r.seeds[m]
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// better reports whether member a ranks above member b for a name of hash h:
// by score, ties (astronomically rare) by name.
func (r *Ring) better(h uint64, a, b int) bool {
	sa, sb := r.score(h, a), r.score(h, b)
	return sa > sb || sa == sb && r.members[a] < r.members[b]
}

// Owner returns the member name ranks first, with no load bound. It returns
// "" when the ring has no members.
func (r *Ring) Owner(name string) string {
	if len(r.members) == 0 {
		return ""
	}
	h, best := xxhash.Sum64String(name), 0
	for m := 1; m < len(r.members); m++ {
		if r.better(h, m, best) {
			best = m
		}
	}
	return r.members[best]
}

// Capacity is the most names Assign gives one member when it assigns n
// distinct names: ceil(n/R)+1 for R members, or more with a LoadFactor. It is
// 0 when the ring has no members.
func (r *Ring) Capacity(n int) int {
	m := len(r.members)
	if m == 0 {
		return 0
	}
	c := (n+m-1)/m + 1
	if r.loadFactor != 0 {
		x := r.loadFactor * float64(n) / float64(m)
		// Forgive float rounding: 1.1*840/7 is 132.00000000000003 in float64.
		c = max(c, int(math.Min(math.Ceil(x*(1-1e-12)), float64(n))))
	}
	return c
}

// Assign maps every distinct name to its member within the load bound
// (Capacity). The result does not depend on the order of names or on
// duplicates in it. With no members the map is empty.
func (r *Ring) Assign(names []string) map[string]string {
	a, _ := r.Place(names, nil)
	return a
}

// Placement constrains where Place may put one name.
type Placement struct {
	// Pin names the member the name must go to while it is on the ring.
	Pin string
	// Avoid names members the name must not go to, unless every member is
	// avoided.
	Avoid []string
}

// IsZero reports whether p constrains nothing.
func (p Placement) IsZero() bool { return p.Pin == "" && len(p.Avoid) == 0 }

// Place is Assign with placement constraints. A name pinned to a member of
// the ring goes there, counting against its capacity even beyond it; a name
// pinned to a member that is not on the ring is placed as if not pinned. A
// name avoiding members goes to the best-ranked member it does not avoid with
// room; if it avoids every member it is placed as if it avoided none, and if
// every member it may use is full it goes over capacity to the first of them.
// notes explains, by name, every placement that a constraint changed or that
// could not honour one; names without constraints have no note.
func (r *Ring) Place(names []string, constraints map[string]Placement) (assign, notes map[string]string) {
	assign, notes = map[string]string{}, map[string]string{}
	if len(r.members) == 0 {
		return assign, notes
	}
	ns := slices.Clone(names)
	slices.Sort(ns)
	ns = slices.Compact(ns)
	capacity := r.Capacity(len(ns))
	index := make(map[string]int, len(r.members))
	for i, m := range r.members {
		index[m] = i
	}

	load := make([]int, len(r.members)) // pinned names
	var free []*candidate
	for _, n := range ns {
		pl := constraints[n]
		if pl.Pin != "" {
			if m, ok := index[pl.Pin]; ok {
				assign[n] = pl.Pin
				notes[n] = "pinned to " + pl.Pin
				load[m]++
				continue
			}
			notes[n] = "pinned to " + pl.Pin + ", which is not on the ring (not a live member, leaving or cordoned): placed by the ring"
		}
		c := &candidate{name: n, hash: xxhash.Sum64String(n)}
		avoid := map[int]bool{}
		for _, a := range pl.Avoid {
			if m, ok := index[a]; ok {
				avoid[m] = true
			}
		}
		if len(avoid) == len(r.members) {
			note(notes, n, "avoids every replica on the ring ("+strings.Join(r.members, ", ")+"): placed as if it avoided none")
			avoid = nil
		} else if len(pl.Avoid) > 0 {
			note(notes, n, "avoids "+strings.Join(pl.Avoid, ", "))
		}
		for m := range r.members {
			if !avoid[m] {
				c.prefs = append(c.prefs, m)
			}
		}
		slices.SortFunc(c.prefs, func(a, b int) int {
			if r.better(c.hash, a, b) {
				return -1
			}
			return 1
		})
		free = append(free, c)
	}

	// Deferred acceptance: free names propose to their next member; a member
	// over its room rejects the name that scores it lowest, which proposes
	// further down its own list.
	held := make([]*holders, len(r.members))
	for m := range held {
		held[m] = &holders{ring: r, member: m}
	}
	for len(free) > 0 {
		c := free[len(free)-1]
		free = free[:len(free)-1]
		if c.next == len(c.prefs) {
			// Rejected by every member it may use: over capacity on its first.
			// Only avoid lists lead here. load[m] grows although m's heap
			// is full: harmless, since the heap pops one name per proposal
			// and keeps its size; m holds its room plus these noted names.
			m := c.prefs[0]
			assign[c.name] = r.members[m]
			load[m]++
			note(notes, c.name, "every replica it may use is full: placed over capacity on "+r.members[m])
			continue
		}
		m := c.prefs[c.next]
		c.next++
		heap.Push(held[m], c)
		if held[m].Len() > max(0, capacity-load[m]) {
			free = append(free, heap.Pop(held[m]).(*candidate))
		}
	}
	for m, h := range held {
		for _, c := range h.items {
			assign[c.name] = r.members[m]
		}
	}
	return assign, notes
}

// note appends why to the note of name.
func note(notes map[string]string, name, why string) {
	if notes[name] != "" {
		why = notes[name] + "; " + why
	}
	notes[name] = why
}

// candidate is a name Place has to assign by deferred acceptance.
type candidate struct {
	name  string
	hash  uint64
	prefs []int // members in rank order, avoided ones left out
	next  int   // index in prefs of the next member to propose to
}

// holders is a member's names in Place, a min-heap by the member's preference
// (the names' scores for it), so that the one it likes least is on top.
type holders struct {
	ring   *Ring
	member int
	items  []*candidate
}

func (h *holders) Len() int { return len(h.items) }
func (h *holders) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	sa, sb := h.ring.score(a.hash, h.member), h.ring.score(b.hash, h.member)
	return sa < sb || sa == sb && cmp.Less(b.name, a.name)
}
func (h *holders) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *holders) Push(x any)    { h.items = append(h.items, x.(*candidate)) }
func (h *holders) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
