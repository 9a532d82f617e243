package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/shard"
	"github.com/clustershard/clustershard/tools/fleet"
)

// coordinators are R in-process shard coordinators with the production
// defaults (lease 15s, renew deadline 10s, retry 2s, bounded loads 1.25),
// each with its own clients, over a static list of cluster names; their
// "remote managers" do nothing, so what is measured is ownership alone.
type coordinators struct {
	cfg     *rest.Config
	ns      string
	names   []string
	mu      sync.Mutex
	running map[string]*coordinator
	retired int64 // ownership writes of stopped coordinators
}

type coordinator struct {
	c      *shard.Coordinator
	cancel context.CancelFunc
	done   chan error
}

type noopHandler struct{}

func (noopHandler) Acquired(context.Context, string)   {}
func (noopHandler) Lost(context.Context, string) error { return nil }

func newCoordinators(cfg *rest.Config, ns string, names []string) *coordinators {
	return &coordinators{cfg: cfg, ns: ns, names: names, running: map[string]*coordinator{}}
}

func (f *coordinators) start(id string) error {
	cfg := rest.CopyConfig(f.cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	cl, err := client.New(cfg, client.Options{Scheme: fleet.Scheme()})
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c, err := shard.New(shard.Options{
		Identity: id, Namespace: f.ns, Client: cl, Kube: kube,
		Clusters: func() ([]string, error) { return f.names, nil },
		Handler:  noopHandler{}, Logger: logr.Discard(),
		Ring: shard.RingOptions{}, // the production default
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	co := &coordinator{c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { co.done <- c.Run(ctx, time.Minute) }()
	f.mu.Lock()
	f.running[id] = co
	f.mu.Unlock()
	return nil
}

// stop shuts coordinator id down gracefully (it hands everything over).
func (f *coordinators) stop(id string) error {
	f.mu.Lock()
	co := f.running[id]
	delete(f.running, id)
	f.mu.Unlock()
	co.cancel()
	err := <-co.done
	f.mu.Lock()
	f.retired += co.c.OwnershipWrites()
	f.mu.Unlock()
	return err
}

func (f *coordinators) close() {
	f.mu.Lock()
	ids := make([]string, 0, len(f.running))
	for id := range f.running {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { _ = f.stop(id) })
	}
	wg.Wait()
}

// writes is every ownership API write made so far.
func (f *coordinators) writes() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.retired
	for _, co := range f.running {
		n += co.c.OwnershipWrites()
	}
	return n
}

// owners maps each owned cluster to its owners (more than one would be a
// violation of the ownership invariant).
func (f *coordinators) owners() map[string][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]string{}
	for id, co := range f.running {
		for _, c := range co.c.Owned() {
			out[c] = append(out[c], id)
		}
	}
	return out
}

// settle waits until every cluster has exactly one owner and no cluster
// changed owner for quiet, and returns cluster → owner and when that
// ownership was first seen.
func (f *coordinators) settle(ctx context.Context, quiet, timeout time.Duration) (map[string]string, time.Time, error) {
	deadline := time.Now().Add(timeout)
	var prev map[string]string
	since := time.Now()
	for {
		cur := map[string]string{}
		for c, os := range f.owners() {
			if len(os) > 1 {
				return nil, time.Time{}, fmt.Errorf("cluster %s owned by %v at once", c, os)
			}
			cur[c] = os[0]
		}
		if len(cur) != len(f.names) || !sameOwners(prev, cur) {
			since = time.Now()
		}
		prev = cur
		if len(cur) == len(f.names) && time.Since(since) >= quiet {
			return cur, since, nil
		}
		if time.Now().After(deadline) {
			return nil, time.Time{}, fmt.Errorf("not settled within %v: %d of %d clusters owned", timeout, len(cur), len(f.names))
		}
		select {
		case <-ctx.Done():
			return nil, time.Time{}, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func sameOwners(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func moved(a, b map[string]string) int {
	n := 0
	for k, v := range b {
		if a[k] != v {
			n++
		}
	}
	return n
}

// perReplica counts owned clusters of each of ids.
func perReplica(owners map[string]string, ids []string) []int {
	out := make([]int, len(ids))
	for _, o := range owners {
		for i, id := range ids {
			if id == o {
				out[i]++
			}
		}
	}
	return out
}
