package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

type fakeSource struct {
	owned []string
	up    map[string]bool
}

func (f *fakeSource) Owned() []string               { return f.owned }
func (f *fakeSource) ManagerUp(cluster string) bool { return f.up[cluster] }

// Each owned cluster has one owned series and one up series; a removed
// source reports nothing.
func TestClusterSeries(t *testing.T) {
	src := &fakeSource{owned: []string{"a", "b"}, up: map[string]bool{"a": true}}
	ClusterSeries.Add(src)
	want := `
# HELP clustershard_cluster_owned 1 for each cluster this replica owns (per-cluster series, off with --per-cluster-metrics=false).
# TYPE clustershard_cluster_owned gauge
clustershard_cluster_owned{cluster="a"} 1
clustershard_cluster_owned{cluster="b"} 1
# HELP clustershard_remote_cluster_up 1 when the remote manager of an owned cluster runs and its API server answers probes, else 0 (per-cluster series, off with --per-cluster-metrics=false).
# TYPE clustershard_remote_cluster_up gauge
clustershard_remote_cluster_up{cluster="a"} 1
clustershard_remote_cluster_up{cluster="b"} 0
`
	if err := testutil.CollectAndCompare(ClusterSeries, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	ClusterSeries.Remove(src)
	if n := testutil.CollectAndCount(ClusterSeries); n != 0 {
		t.Fatalf("%d series after Remove", n)
	}
}
