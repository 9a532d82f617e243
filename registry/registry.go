package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/internal/metrics"
)

// Registry holds the remote managers of this replica, one per remote cluster
// name. Its methods are safe for concurrent use, and no registry-wide lock is
// held while a manager starts or stops or while a WithClient callback runs, so
// a slow or unreachable cluster never blocks calls for other clusters.
type Registry struct {
	ctx  context.Context
	opts Options

	mu      sync.Mutex
	entries map[string]*entry
	closed  bool
}

// New returns a Registry. Remote managers derive their contexts from ctx, which
// the caller owns; cancelling it stops every manager (Close waits for them).
func New(ctx context.Context, opts Options) (*Registry, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	return &Registry{ctx: ctx, opts: opts, entries: map[string]*entry{}}, nil
}

// Spawn starts a remote manager for cluster name with cfg and returns once its
// fx app has started (the manager runs in its own goroutine). It returns
// ErrAlreadyExist, keeping the existing entry, if name is known; a changed
// cfg is applied only by Stop then Spawn.
func (r *Registry) Spawn(name string, cfg *rest.Config, opts ...SpawnOption) error {
	if name == "" || cfg == nil {
		return errors.New("registry: Spawn needs a cluster name and a rest.Config")
	}
	var so spawnOptions
	for _, o := range opts {
		o(&so)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = r.opts.QPS, r.opts.Burst

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	if _, ok := r.entries[name]; ok {
		r.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrAlreadyExist, name)
	}
	e := &entry{
		name:       name,
		parent:     r.ctx,
		cfg:        cfg,
		namespaces: so.namespaces,
		log:        r.opts.Logger.WithValues("cluster", name),
		gate:       newGate(r.ctx, name, r.opts.Fence),
		stopGrace:  r.opts.StopGrace,
		report:     r.opts.OnEvent,
		mgrDone:    make(chan struct{}),
		startDone:  make(chan struct{}),
		stopDone:   make(chan struct{}),
		probeDone:  make(chan struct{}),
		state:      StateStarting,
		info:       Info{Name: name, State: StateStarting, Since: time.Now(), Spawned: time.Now()},
	}
	r.entries[name] = e
	r.mu.Unlock()
	metrics.RemoteManagers.WithLabelValues(string(StateStarting)).Inc()

	if err := r.start(e); err != nil {
		e.gate.close()
		r.remove(e)
		metrics.RemoteManagers.WithLabelValues(string(StateStarting)).Dec()
		close(e.startDone)
		return fmt.Errorf("spawn remote cluster %q: %w", name, err)
	}
	close(e.startDone)
	e.log.V(1).Info("Remote manager spawned")
	e.setState(StateRunning, nil)
	return nil
}

// start builds and starts the entry's fx app, then its probe loop.
func (r *Registry) start(e *entry) error {
	p, err := newProber(e.cfg, r.opts.ProbeTimeout)
	if err != nil {
		return err
	}
	e.app = r.newApp(e)
	if err := e.app.Err(); err != nil {
		return fmt.Errorf("assemble remote app: %w", err)
	}
	startCtx, cancel := context.WithTimeout(r.ctx, r.opts.StartTimeout)
	defer cancel()
	if err := e.app.Start(startCtx); err != nil {
		return fmt.Errorf("start remote app: %w", err)
	}
	// Running means the manager has fully started (caches synced, controllers
	// started: Elected closes last when leader election is off), so the
	// client serves reads. Bounded by StartTimeout.
	select {
	case <-e.mgr.Elected():
	case <-e.mgrDone:
	case <-startCtx.Done():
	}
	if err := startCtx.Err(); err != nil || isClosed(e.mgrDone) {
		if err == nil {
			err = errors.New("remote manager exited while starting")
		}
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.opts.StartTimeout)
		defer cancel()
		return errors.Join(fmt.Errorf("remote manager did not start: %w", err), e.app.Stop(stopCtx))
	}
	go e.probeLoop(p, r.opts.ProbeInterval, r.opts.ProbeFailureThreshold)
	return nil
}

// remove deletes e from the registry if it is still the entry of its name.
func (r *Registry) remove(e *entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries[e.name] == e {
		delete(r.entries, e.name)
	}
}

func (r *Registry) lookup(name string) (*entry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotExist, name)
	}
	return e, nil
}

// Stop stops the remote manager of name and removes it, waiting at most until
// ctx ends. Remote calls of the cluster are refused from the moment Stop
// begins, and those in flight are cancelled and waited for. If ctx ends first
// Stop returns an error, and the entry stays (refusing Spawn with
// ErrAlreadyExist) until the manager has exited. It returns ErrNotExist for an
// unknown name.
func (r *Registry) Stop(ctx context.Context, name string) error {
	e, err := r.lookup(name)
	if err != nil {
		return err
	}
	return e.stop(ctx, func() { r.remove(e) })
}

// WithClient calls f with the remote client of name. The client is valid only
// during f, and its calls fail once the cluster is being stopped. It returns
// ErrNotExist for an unknown or stopping cluster and ErrNotRunning for one that
// is starting or failed. f may call Spawn, Stop and WithClient.
func (r *Registry) WithClient(name string, f func(client.Client) error) error {
	e, err := r.lookup(name)
	if err != nil {
		return err
	}
	c, err := e.runningClient()
	if err != nil {
		return err
	}
	return f(c)
}

// Names returns the names of all entries, sorted.
func (r *Registry) Names() []string {
	r.mu.Lock()
	names := make([]string, 0, len(r.entries))
	for n := range r.entries {
		names = append(names, n)
	}
	r.mu.Unlock()
	slices.Sort(names)
	return names
}

// Get returns a snapshot of the entry of name.
func (r *Registry) Get(name string) (Info, bool) {
	e, err := r.lookup(name)
	if err != nil {
		return Info{}, false
	}
	return e.snapshot(), true
}

// Close stops every entry in parallel, bounded by ctx, and refuses later Spawns.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	entries := make([]*entry, 0, len(r.entries))
	for _, e := range r.entries {
		entries = append(entries, e)
	}
	r.mu.Unlock()
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() { errs[i] = e.stop(ctx, func() { r.remove(e) }) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
