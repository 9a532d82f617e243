package promql

import (
	"slices"
	"testing"
)

func TestMetricNames(t *testing.T) {
	got, err := MetricNames(`histogram_quantile(0.99, sum by (le) (rate(a_bucket{x="y"}[5m]))) > 3 or sum(b) > max(c) unless on() {__name__="b"}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a_bucket", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("names = %v, want %v", got, want)
	}
	if _, err := MetricNames(`sum(rate(a[5m])`); err == nil {
		t.Fatal("an unbalanced expression parsed")
	}
	if _, err := MetricNames(`{__name__=~"clustershard_.*"}`); err == nil {
		t.Fatal("a selector without an exact name was accepted")
	}
}
