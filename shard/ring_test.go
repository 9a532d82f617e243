package shard_test

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/clustershard/clustershard/shard"
)

// Property tests use this many random name sets, seeded 0..seeds-1.
const seeds = 50

func mustRing(t testing.TB, members []string, opts shard.RingOptions) *shard.Ring {
	t.Helper()
	r, err := shard.NewRing(members, opts)
	if err != nil {
		t.Fatalf("NewRing(%v, %+v): %v", members, opts, err)
	}
	return r
}

// randomNames returns n random RemoteCluster-like names (duplicates possible).
func randomNames(seed uint64, n int) []string {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("rc-%08x", rng.Uint32())
	}
	return names
}

// seqNames returns prefix-0000, prefix-0001, ...
func seqNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return names
}

func replicas(n int) []string {
	return seqNames("clustershard", n)
}

func distinct(names []string) int {
	s := slices.Clone(names)
	slices.Sort(s)
	return len(slices.Compact(s))
}

// loads counts names per member in an assignment.
func loads(a map[string]string) map[string]int {
	l := map[string]int{}
	for _, m := range a {
		l[m]++
	}
	return l
}

func maxLoad(a map[string]string) int {
	return slices.Max(slices.Collect(maps.Values(loads(a))))
}

// ceilRat is ceil(p*n/(q*m)), the capacity for LoadFactor p/q, in exact
// integer arithmetic.
func ceilRat(p, q, n, m int) int {
	return (p*n + q*m - 1) / (q * m)
}

// summary formats min/median/max of vs.
func summary[T cmp.Ordered](vs []T) string {
	s := slices.Clone(vs)
	slices.Sort(s)
	return fmt.Sprintf("min %v / median %v / max %v", s[0], s[len(s)/2], s[len(s)-1])
}

// oracleOrder returns the members in the order a name with hash h meets their
// vnodes going clockwise (first visit of each member), computed by brute force
// from the specification: vnode positions xxhash64(member+"#"+i), ties broken
// by member name and then vnode number.
func oracleOrder(members []string, vnodes int, h uint64) []string {
	type pos struct {
		dist   uint64
		member string
		i      int
	}
	var ps []pos
	for _, m := range members {
		for i := range vnodes {
			ps = append(ps, pos{xxhash.Sum64String(m+"#"+strconv.Itoa(i)) - h, m, i}) // clockwise distance mod 2^64
		}
	}
	slices.SortFunc(ps, func(a, b pos) int {
		return cmp.Or(cmp.Compare(a.dist, b.dist), cmp.Compare(a.member, b.member), cmp.Compare(a.i, b.i))
	})
	var order []string
	for _, p := range ps {
		if !slices.Contains(order, p.member) {
			order = append(order, p.member)
		}
	}
	return order
}

// oracleAssign is a brute-force reference of bounded-load assignment with
// LoadFactor p/q over distinct members.
func oracleAssign(members []string, vnodes, p, q int, names []string) map[string]string {
	ns := slices.Clone(names)
	slices.SortFunc(ns, func(a, b string) int {
		return cmp.Or(cmp.Compare(xxhash.Sum64String(a), xxhash.Sum64String(b)), cmp.Compare(a, b))
	})
	ns = slices.Compact(ns)
	capacity := ceilRat(p, q, len(ns), len(members))
	load := map[string]int{}
	out := map[string]string{}
	for _, n := range ns {
		for _, m := range oracleOrder(members, vnodes, xxhash.Sum64String(n)) {
			if load[m] < capacity {
				load[m]++
				out[n] = m
				break
			}
		}
	}
	return out
}

func TestRingOptions(t *testing.T) {
	tests := []struct {
		name    string
		members []string
		opts    shard.RingOptions
		wantErr bool
	}{
		{"defaults", replicas(3), shard.RingOptions{}, false},
		{"one vnode", replicas(3), shard.RingOptions{VNodes: 1}, false},
		{"load factor just above 1", replicas(3), shard.RingOptions{LoadFactor: 1.0001}, false},
		{"load factor 1.1", replicas(3), shard.RingOptions{LoadFactor: 1.1}, false},
		{"huge load factor", replicas(3), shard.RingOptions{LoadFactor: 1e300}, false},
		{"no members", nil, shard.RingOptions{LoadFactor: 1.25}, false},
		{"negative vnodes", replicas(3), shard.RingOptions{VNodes: -1}, true},
		{"load factor 1", replicas(3), shard.RingOptions{LoadFactor: 1}, true},
		{"load factor 0.5", replicas(3), shard.RingOptions{LoadFactor: 0.5}, true},
		{"tiny load factor", replicas(3), shard.RingOptions{LoadFactor: math.SmallestNonzeroFloat64}, true},
		{"negative load factor", replicas(3), shard.RingOptions{LoadFactor: -1.5}, true},
		{"NaN load factor", replicas(3), shard.RingOptions{LoadFactor: math.NaN()}, true},
		{"infinite load factor", replicas(3), shard.RingOptions{LoadFactor: math.Inf(1)}, true},
		{"empty member name", []string{"a", ""}, shard.RingOptions{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := shard.NewRing(tt.members, tt.opts)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("NewRing(%v, %+v) error = %v, want error %v", tt.members, tt.opts, err, tt.wantErr)
			}
			if err != nil {
				if r != nil {
					t.Errorf("NewRing returned a ring together with error %v", err)
				}
				return
			}
			a := r.Assign(seqNames("cluster", 100))
			if len(r.Members()) > 0 && len(a) != 100 {
				t.Errorf("Assign assigned %d of 100 names", len(a))
			}
		})
	}
}

func TestRingEdgeCases(t *testing.T) {
	for _, lf := range []float64{0, 1.1} {
		t.Run(fmt.Sprintf("LoadFactor=%v", lf), func(t *testing.T) {
			empty := mustRing(t, nil, shard.RingOptions{LoadFactor: lf})
			if got := empty.Owner("x"); got != "" {
				t.Errorf("no members: Owner = %q, want \"\"", got)
			}
			if got := empty.Members(); len(got) != 0 {
				t.Errorf("no members: Members = %v, want none", got)
			}
			if got := empty.Assign([]string{"x", "y"}); got == nil || len(got) != 0 {
				t.Errorf("no members: Assign = %#v, want an empty map", got)
			}

			one := mustRing(t, []string{"solo", "solo"}, shard.RingOptions{LoadFactor: lf})
			names := append(randomNames(1, 300), "", "solo")
			for n, m := range one.Assign(names) {
				if m != "solo" || one.Owner(n) != "solo" {
					t.Fatalf("one member: %q assigned to %q, Owner %q", n, m, one.Owner(n))
				}
			}
			if got := len(one.Assign(names)); got != distinct(names) {
				t.Errorf("one member: assigned %d names, want %d", got, distinct(names))
			}

			r := mustRing(t, replicas(4), shard.RingOptions{LoadFactor: lf})
			for _, names := range [][]string{nil, {}} {
				if got := r.Assign(names); got == nil || len(got) != 0 {
					t.Errorf("Assign(%#v) = %#v, want an empty map", names, got)
				}
			}
			// A single name always goes to its unbounded owner: capacity is at least 1.
			if got, want := r.Assign([]string{"x"})["x"], r.Owner("x"); got != want {
				t.Errorf("Assign(x) = %q, want Owner %q", got, want)
			}
		})
	}
}

func TestRingMembers(t *testing.T) {
	r := mustRing(t, []string{"c", "a", "b", "a", "c"}, shard.RingOptions{})
	if got, want := r.Members(), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("Members = %v, want %v", got, want)
	}
	r.Members()[0] = "mutated"
	if got := r.Members()[0]; got != "a" {
		t.Errorf("Members exposes internal state: got %q after mutating a copy", got)
	}
}

// TestRingMatchesOracle checks Owner and Assign against brute-force references
// of the specification, including rings so small that many names wrap around
// past the last vnode.
func TestRingMatchesOracle(t *testing.T) {
	for _, vnodes := range []int{1, 2, 3, 16} {
		for _, nm := range []int{1, 2, 3, 5} {
			members := replicas(nm)
			names := randomNames(uint64(vnodes*100+nm), 60)
			plain := mustRing(t, members, shard.RingOptions{VNodes: vnodes})
			assign := plain.Assign(names)
			for _, n := range names {
				want := oracleOrder(members, vnodes, xxhash.Sum64String(n))[0]
				if got := plain.Owner(n); got != want {
					t.Fatalf("vnodes=%d members=%d: Owner(%q) = %q, want %q", vnodes, nm, n, got, want)
				}
				if assign[n] != want {
					t.Fatalf("vnodes=%d members=%d: Assign[%q] = %q, want %q", vnodes, nm, n, assign[n], want)
				}
			}
			for _, lf := range []struct{ p, q int }{{11, 10}, {5, 4}, {3, 2}, {2, 1}} {
				bounded := mustRing(t, members, shard.RingOptions{VNodes: vnodes, LoadFactor: float64(lf.p) / float64(lf.q)})
				got, want := bounded.Assign(names), oracleAssign(members, vnodes, lf.p, lf.q, names)
				if !maps.Equal(got, want) {
					t.Fatalf("vnodes=%d members=%d LoadFactor=%d/%d: Assign = %v, want %v", vnodes, nm, lf.p, lf.q, got, want)
				}
			}
		}
	}
}

func TestRingDeterminism(t *testing.T) {
	members := replicas(10)
	names := randomNames(7, 1000)
	for _, lf := range []float64{0, 1.1, 1.5} {
		t.Run(fmt.Sprintf("LoadFactor=%v", lf), func(t *testing.T) {
			opts := shard.RingOptions{LoadFactor: lf}
			want := mustRing(t, members, opts).Assign(names)
			if len(want) != distinct(names) {
				t.Fatalf("assigned %d names, want %d", len(want), distinct(names))
			}
			rng := rand.New(rand.NewPCG(42, uint64(lf*100)))
			for i := range 20 {
				ms := slices.Clone(members)
				ns := slices.Clone(names)
				if i%2 == 1 { // duplicates, in members and in names
					ms = append(ms, ms[:1+rng.IntN(len(ms))]...)
					ns = append(ns, ns[:1+rng.IntN(len(ns))]...)
				}
				rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
				rng.Shuffle(len(ns), func(i, j int) { ns[i], ns[j] = ns[j], ns[i] })
				r := mustRing(t, ms, opts)
				if got := r.Assign(ns); !maps.Equal(got, want) {
					t.Fatalf("permutation %d: Assign differs", i)
				}
				if !slices.Equal(r.Members(), members) {
					t.Fatalf("permutation %d: Members = %v, want %v", i, r.Members(), members)
				}
			}
			if lf == 0 {
				r := mustRing(t, members, opts)
				for n, m := range want {
					if r.Owner(n) != m {
						t.Fatalf("Assign[%q] = %q, Owner = %q", n, m, r.Owner(n))
					}
				}
			}
		})
	}
}

// TestRingBoundedBalance checks the load bound and that it is not stricter
// than specified: a member whose unbounded load reaches the capacity is filled
// exactly to it.
func TestRingBoundedBalance(t *testing.T) {
	members := replicas(10)
	sets := map[string][]string{"cluster-0000..0999": seqNames("cluster", 1000)}
	for s := range uint64(5) {
		sets[fmt.Sprintf("random seed %d", s)] = randomNames(s, 1000)
	}
	plain := mustRing(t, members, shard.RingOptions{})
	bounded := mustRing(t, members, shard.RingOptions{LoadFactor: 1.10})
	for _, setName := range slices.Sorted(maps.Keys(sets)) {
		names := sets[setName]
		n := distinct(names)
		mean := float64(n) / float64(len(members))
		capacity := ceilRat(11, 10, n, len(members))
		a := bounded.Assign(names)
		if len(a) != n {
			t.Fatalf("%s: assigned %d names, want %d", setName, len(a), n)
		}
		if got := float64(maxLoad(a)) / mean; got > 1.10 {
			t.Errorf("%s: bounded max/mean = %.3f, want <= 1.10", setName, got)
		}
		bl, ul := loads(a), loads(plain.Assign(names))
		for _, m := range members {
			if bl[m] > capacity || bl[m] < min(ul[m], capacity) {
				t.Errorf("%s: member %s has bounded load %d, unbounded %d, capacity %d", setName, m, bl[m], ul[m], capacity)
			}
		}
		t.Logf("%s: %d names, max/mean unbounded %.2f, bounded %.2f", setName, n, float64(maxLoad(plain.Assign(names)))/mean, float64(maxLoad(a))/mean)
	}
}

// TestRingBoundedCapacity checks the capacity ceil(LoadFactor*n/m) exactly,
// on fixed and random sizes, including LoadFactor*n/m that are integers but
// round up in float64 (1.1*840/7 = 132.00000000000003). A member whose
// unbounded load reaches the capacity must be filled exactly to it, so a
// capacity off by one either way fails.
func TestRingBoundedCapacity(t *testing.T) {
	type tc struct{ n, m, p, q int }
	cases := []tc{{840, 7, 11, 10}, {1000, 10, 11, 10}, {1000, 11, 11, 10}, {1000, 9, 11, 10}, {7, 3, 3, 2}}
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range 100 {
		lf := []struct{ p, q int }{{11, 10}, {101, 100}, {6, 5}, {5, 4}, {3, 2}, {2, 1}, {7, 3}}[i%7]
		m, n := 1+rng.IntN(20), rng.IntN(1000)
		if i%2 == 0 { // LoadFactor*n/m is an integer
			n = lf.q * m * rng.IntN(1+1000/(lf.q*m))
		}
		cases = append(cases, tc{n, m, lf.p, lf.q})
	}
	for i, c := range cases {
		members, names := replicas(c.m), seqNames(fmt.Sprint("rc", i), c.n)
		a := mustRing(t, members, shard.RingOptions{VNodes: 32, LoadFactor: float64(c.p) / float64(c.q)}).Assign(names)
		if len(a) != c.n {
			t.Fatalf("%+v: assigned %d names", c, len(a))
		}
		capacity := ceilRat(c.p, c.q, c.n, c.m)
		bl, ul := loads(a), loads(mustRing(t, members, shard.RingOptions{VNodes: 32}).Assign(names))
		for _, mem := range members {
			if bl[mem] > capacity || bl[mem] < min(ul[mem], capacity) {
				t.Fatalf("n=%d m=%d LoadFactor=%d/%d: member %s has bounded load %d, unbounded %d, capacity %d",
					c.n, c.m, c.p, c.q, mem, bl[mem], ul[mem], capacity)
			}
		}
	}
}
