package bench

import (
	"math"
	"slices"
	"strconv"
)

func parseFloat(s string) (float64, error) { return strconv.ParseFloat(s, 64) }

// quantile returns the q-quantile (nearest rank) of xs.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// maxOverMean is the largest value over the mean.
func maxOverMean(xs []int) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum, mx := 0, 0
	for _, x := range xs {
		sum += x
		mx = max(mx, x)
	}
	return float64(mx) / (float64(sum) / float64(len(xs)))
}

// slope is the least-squares slope of y over x.
func slope(x, y []float64) float64 {
	n := float64(len(x))
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx += x[i]
		sy += y[i]
		sxx += x[i] * x[i]
		sxy += x[i] * y[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
