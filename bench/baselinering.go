package bench

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// baselineAssign is the ring clustershard used before rendezvous hashing,
// kept as the baseline scenario 3 measures against in the same run:
// consistent hashing with 256 virtual nodes per member and bounded loads
// (capacity ceil(1.25·M/R)), names placed in order of their hash, each on
// the first member clockwise with room.
func baselineAssign(members, names []string) map[string]string {
	type vnode struct {
		hash   uint64
		member int
	}
	ms := slices.Clone(members)
	slices.Sort(ms)
	var points []vnode
	for m, name := range ms {
		for i := range 256 {
			points = append(points, vnode{xxhash.Sum64String(name + "#" + strconv.Itoa(i)), m})
		}
	}
	slices.SortFunc(points, func(a, b vnode) int { return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.member, b.member)) })
	ns := slices.Clone(names)
	slices.SortFunc(ns, func(a, b string) int {
		return cmp.Or(cmp.Compare(xxhash.Sum64String(a), xxhash.Sum64String(b)), cmp.Compare(a, b))
	})
	ns = slices.Compact(ns)
	capacity := max(int(math.Ceil(1.25*float64(len(ns))/float64(len(ms))*(1-1e-12))), (len(ns)+len(ms)-1)/len(ms))
	load := make([]int, len(ms))
	out := make(map[string]string, len(ns))
	for _, n := range ns {
		h := xxhash.Sum64String(n)
		i, _ := slices.BinarySearchFunc(points, h, func(p vnode, h uint64) int { return cmp.Compare(p.hash, h) })
		for ; ; i++ {
			if m := points[i%len(points)].member; load[m] < capacity {
				load[m]++
				out[n] = ms[m]
				break
			}
		}
	}
	return out
}
