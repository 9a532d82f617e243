package metrics

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The clustershard names of SeriesNames are exactly the families the
// collectors export (with a kind and a cluster source, so every family has
// a series).
func TestSeriesNamesMatchCollectors(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	RegisterClusterSeries(reg)
	InitKind("Widget")
	src := &fakeSource{owned: []string{"a"}}
	ClusterSeries.Add(src)
	defer ClusterSeries.Remove(src)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fams {
		got = append(got, f.GetName())
	}
	var want []string
	for _, list := range [][]string{gauges, counters, histograms} {
		want = append(want, list...)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("collectors export %v\nthe list names %v", got, want)
	}
	names := SeriesNames()
	for _, h := range histograms {
		if !names[h+"_bucket"] || names[h] {
			t.Fatalf("histogram %s: want its _bucket, not its bare name", h)
		}
	}
}
