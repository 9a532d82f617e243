package bench

import (
	"fmt"
	"slices"
	"time"

	"github.com/clustershard/clustershard/shard"
)

// BalanceSweep is scenario 3's sweep of one ring over every fleet size: M in
// 1..2,000 (every M to 200, then a stride) and R in 1..10.
type BalanceSweep struct {
	// Ring is "rendezvous" (the ring in use) or "baseline" (the consistent
	// hashing with bounded loads 1.25 it replaced), computed in the same run.
	Ring string `json:"ring"`
	// Sizes is how many (M, R) pairs were assigned.
	Sizes int `json:"sizes"`
	// OverBound counts pairs with M >= R where a replica owns more than
	// ceil(M/R)+1; WorstExcess is the most by which one does.
	OverBound   int `json:"overBound"`
	WorstExcess int `json:"worstExcess"`
	// Examples are the owned counts of the fleets named in the issue.
	Examples map[string][]int `json:"examples"`
	// Moves are joins (R -> R+1) and leaves (a middle replica of R+1) over
	// the sizes: moved/ideal in total, per case (median, p95, max), and per
	// case at M >= 1,000.
	MovedOverIdealTotal  float64 `json:"movedOverIdealTotal"`
	MovedOverIdealMedian float64 `json:"movedOverIdealMedian"`
	MovedOverIdealP95    float64 `json:"movedOverIdealP95"`
	MovedOverIdealMax    float64 `json:"movedOverIdealMax"`
	LargeMovedMax        float64 `json:"movedOverIdealMaxAtM1000"`
	// AssignMs is the mean time of one assignment at M=2,000, R=10.
	AssignMs float64 `json:"assignMsAtM2000R10"`
}

// sweepSizes are the fleet sizes of the sweep.
func sweepSizes() []int {
	var ms []int
	for m := 1; m <= 2000; m++ {
		if m <= 200 || m%37 == 0 || m == 2000 {
			ms = append(ms, m)
		}
	}
	return ms
}

func replicaNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("replica-%d", i)
	}
	return out
}

// balanceSweep runs the sweep for one assignment function.
func balanceSweep(ring string, assign func(members, names []string) map[string]string) BalanceSweep {
	res := BalanceSweep{Ring: ring, Examples: map[string][]int{}}
	var ratios, large []float64
	var sumMoved, sumIdeal float64
	for _, m := range sweepSizes() {
		names := clusterNames(m)
		for r := 1; r <= 10 && r <= m; r++ {
			res.Sizes++
			base := assign(replicaNames(r), names)
			owned := perReplica(base, replicaNames(r))
			if excess := slices.Max(owned) - ((m+r-1)/r + 1); excess > 0 {
				res.OverBound++
				res.WorstExcess = max(res.WorstExcess, excess)
			}
			if key := fmt.Sprintf("M=%d R=%d", m, r); m == 30 && r == 3 || m == 45 && r == 4 || m == 1998 && r == 10 {
				res.Examples[key] = owned
			}
			if r == 10 || r+1 > m {
				continue
			}
			after := assign(replicaNames(r+1), names)
			leaver := replicaNames(r + 1)[r/2]
			rest := slices.DeleteFunc(replicaNames(r+1), func(s string) bool { return s == leaver })
			left := assign(rest, names)
			leaverOwned := 0
			for _, o := range after {
				if o == leaver {
					leaverOwned++
				}
			}
			for _, c := range [][2]float64{{float64(moved(base, after)), float64(m) / float64(r+1)}, {float64(moved(after, left)), float64(leaverOwned)}} {
				if c[1] == 0 {
					continue
				}
				sumMoved += c[0]
				sumIdeal += c[1]
				ratios = append(ratios, c[0]/c[1])
				if m >= 1000 {
					large = append(large, c[0]/c[1])
				}
			}
		}
	}
	slices.Sort(ratios)
	res.MovedOverIdealTotal = round(sumMoved/sumIdeal, 3)
	res.MovedOverIdealMedian = round(ratios[len(ratios)/2], 3)
	res.MovedOverIdealP95 = round(ratios[len(ratios)*95/100], 3)
	res.MovedOverIdealMax = round(ratios[len(ratios)-1], 3)
	res.LargeMovedMax = round(slices.Max(large), 3)
	names, members := clusterNames(2000), replicaNames(10)
	res.AssignMs = round(timeIt(func() { assign(members, names) }, 20).Seconds()*1000, 3)
	return res
}

// ringAssign assigns with the ring in use, with the production options.
func ringAssign(members, names []string) map[string]string {
	r, err := shard.NewRing(members, shard.RingOptions{})
	if err != nil {
		panic(err) // members are valid names
	}
	return r.Assign(names)
}

// timeIt returns the mean duration of n calls of f.
func timeIt(f func(), n int) time.Duration {
	start := time.Now()
	for range n {
		f()
	}
	return time.Since(start) / time.Duration(n)
}
