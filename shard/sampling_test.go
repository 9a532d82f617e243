package shard_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// sampleOwnership records, every 2 ms, which instance may write for which
// cluster (Owns), keyed by the instance's map key, so that two write
// permissions that overlap show in writes.check. The returned function
// stops the sampling and waits for it; it also runs at cleanup.
func sampleOwnership(t *testing.T, in map[string]*instance, clusters []string, writes *tracker) (stop func()) {
	return sample(t, in, clusters, writes, func(i *instance, c string) bool { return i.c.Owns(c) })
}

// sampleHolds is sampleOwnership for Holds: which instance holds which
// cluster (its manager may run, its writes fenced within the grace).
func sampleHolds(t *testing.T, in map[string]*instance, clusters []string, holds *tracker) (stop func()) {
	return sample(t, in, clusters, holds, func(i *instance, c string) bool { return i.c.Holds(c) })
}

// sample records, every 2 ms, the intervals in which has(instance,
// cluster) is true into tr.
func sample(t *testing.T, in map[string]*instance, clusters []string, tr *tracker, has func(*instance, string) bool) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			for key, i := range in {
				for _, c := range clusters {
					if has(i, c) {
						tr.start(key, c)
					} else {
						tr.stop(key, c)
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func ownsAll(i *instance, clusters []string) bool {
	for _, c := range clusters {
		if !i.c.Owns(c) {
			return false
		}
	}
	return true
}

// waitOwnsAll waits until i owns every cluster, failing the test after
// timeout; who names i in the failure.
func waitOwnsAll(t *testing.T, i *instance, clusters []string, timeout time.Duration, who string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return ownsAll(i, clusters), nil
	}); err != nil {
		t.Fatalf("%s did not own every cluster within %v", who, timeout)
	}
}

// consistently checks violated every 50 ms for d and fails the test at the
// first non-empty answer.
func consistently(t *testing.T, d time.Duration, violated func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if msg := violated(); msg != "" {
			t.Fatal(msg)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if msg := violated(); msg != "" {
		t.Fatal(msg)
	}
}
