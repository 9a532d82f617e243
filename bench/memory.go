package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/clustershard/clustershard/internal/tools/drill"
)

const mib = 1 << 20

// memory measures scenario 4: the RSS of one replica owning n idle clusters
// (each remote manager watching the replicated kind in its own namespace of
// one shared remote API server) for every n of sizes, the slope in MiB per
// cluster, and the cold start of r replicas over m clusters.
func memory(ctx context.Context, base drill.Options, sizes []int, r, m int, idle time.Duration, logf func(string, ...any)) (*Memory, error) {
	res := &Memory{ColdStartR: r, ColdStartM: m, Idle: idle.String()}
	var xs, ys []float64
	for _, n := range sizes {
		o := base
		o.Replicas, o.Remotes, o.ClustersPerRemote, o.ObjectsPerCluster = 1, 1, n, 0
		s, err := drill.NewSession(ctx, o)
		if err != nil {
			return res, fmt.Errorf("%d clusters: %w", n, err)
		}
		sleep(ctx, idle) // idle: caches synced, start-up garbage collected
		rss, err := s.RSS()
		_ = s.Close()
		if err != nil {
			return res, err
		}
		v := float64(rss[drill.ReplicaID(0)]) / mib
		res.Points = append(res.Points, MemoryPoint{Clusters: n, RSSMiB: round(v, 1)})
		xs, ys = append(xs, float64(n)), append(ys, v)
		logf("  1 replica owning %d clusters: RSS %.1f MiB", n, v)
	}
	res.MiBPerCluster = round(slope(xs, ys), 3)

	o := base
	o.Replicas, o.Remotes, o.ClustersPerRemote, o.ObjectsPerCluster = r, 2, m/2, 0
	s, err := drill.NewSession(ctx, o)
	if err != nil {
		return res, fmt.Errorf("cold start: %w", err)
	}
	defer func() { _ = s.Close() }()
	res.ColdAllOwned = round(s.AllOwned().Seconds(), 3)
	res.ColdAllRunning = round(s.StartUp().Seconds(), 3)
	rss, err := s.RSS()
	if err != nil {
		return res, err
	}
	for _, id := range slices.Sorted(maps.Keys(rss)) {
		res.ColdStartRSSMiB = append(res.ColdStartRSSMiB, round(float64(rss[id])/mib, 1))
	}
	logf("  cold start R=%d M=%d: all owned after %.2fs, all managers running after %.2fs; RSS %v MiB", r, m, res.ColdAllOwned, res.ColdAllRunning, res.ColdStartRSSMiB)
	return res, nil
}
