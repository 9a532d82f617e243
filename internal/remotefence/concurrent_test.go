package remotefence_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/clustershard/clustershard/internal/remotefence"
)

// After a crash every cluster of the replica moves at once: the owners of
// the clusters of one API server raise their keys of the one ConfigMap at
// the same time, and none has to wait for another. Raises of one cluster
// that race leave distinct epochs, and only the highest is admitted.
func TestConcurrentRaises(t *testing.T) {
	remote := env.Remotes[0].Config
	const n = 10
	var wg sync.WaitGroup
	epochs := make([]remotefence.Epoch, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			epochs[i], errs[i] = remotefence.Raise(t.Context(), remote, remotefence.Options{Cluster: fmt.Sprintf("many-%d", i)})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || !epochs[i].Enforced {
			t.Fatalf("cluster many-%d: %+v %v", i, epochs[i], errs[i])
		}
	}
	ensureNamespace(t, "concurrent")
	same := make([]remotefence.Epoch, 4)
	for i := range same {
		wg.Go(func() {
			same[i], errs[i] = remotefence.Raise(t.Context(), remote, remotefence.Options{Cluster: "contended"})
		})
	}
	wg.Wait()
	top, seen := 0, map[int64]bool{}
	for i := range same {
		if errs[i] != nil {
			t.Fatalf("raise %d of one cluster: %v", i, errs[i])
		}
		if seen[same[i].Value] {
			t.Fatalf("two raises of one cluster got epoch %d", same[i].Value)
		}
		seen[same[i].Value] = true
		if same[i].Value > same[top].Value {
			top = i
		}
	}
	for i := range same {
		err := createConfigMap(t.Context(), clientset(t, same[i].Config(remote)), "concurrent", fmt.Sprintf("by-%d", i))
		if i == top && err != nil {
			t.Fatalf("the highest epoch %d: %v", same[i].Value, err)
		}
		if i != top && !remotefence.IsFenced(err) {
			t.Fatalf("epoch %d below the highest %d: want fenced, got %v", same[i].Value, same[top].Value, err)
		}
	}
}
