package helmrelease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/chart"
)

// ErrFetching is returned while a chart is being fetched in the background.
var ErrFetching = errors.New("chart is being fetched")

// Options configure a chart cache.
type Options struct {
	// Dir holds repository indexes while they are read and the OCI
	// credentials file registry-config.json (default: a folder under os.TempDir()).
	Dir string
	// Timeout bounds one fetch (default 2m).
	Timeout time.Duration
	// RetryAfter is how long a failed fetch's error is returned before the
	// next fetch is tried (default 10s).
	RetryAfter time.Duration
	// ResolveTTL is how long a chart fetched for an empty or constraint
	// version is kept before it is resolved again (default 10m). A chart of
	// an exact version is kept until evicted.
	ResolveTTL time.Duration
	// MaxEntries bounds the cache (default 128); the oldest are evicted.
	MaxEntries int
	// PlainHTTP talks to OCI registries over plain HTTP (local registries).
	PlainHTTP bool
	// Log receives a line per fetch.
	Log logr.Logger
}

// Charts is a cache of charts. Local charts are read at each call; remote
// charts are fetched once per reference in the background, so a slow or
// unreachable repository never holds a caller (another cluster's reconcile).
type Charts struct {
	o       Options
	f       *fetcher
	ctx     context.Context
	cancel  context.CancelFunc
	fetches sync.WaitGroup

	mu      sync.Mutex
	entries map[Ref]*entry          // one per reference asked for
	content map[string]*chart.Chart // one per exact version (or archive URL)
}

type entry struct {
	done    bool
	chart   *chart.Chart
	err     error
	at      time.Time
	waiters []func()
}

// DefaultFetchTimeout bounds one chart download unless Options.Timeout says
// otherwise.
const DefaultFetchTimeout = 2 * time.Minute

// NewCharts returns an empty cache.
func NewCharts(o Options) (*Charts, error) {
	if o.Dir == "" {
		o.Dir = filepath.Join(os.TempDir(), "clustershard-charts")
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultFetchTimeout
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = 10 * time.Second
	}
	if o.ResolveTTL <= 0 {
		o.ResolveTTL = 10 * time.Minute
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 128
	}
	f, err := newFetcher(o.Dir, o.Timeout, o.PlainHTTP)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Charts{o: o, f: f, ctx: ctx, cancel: cancel, entries: map[Ref]*entry{}, content: map[string]*chart.Chart{}}, nil
}

// Chart returns the chart r names. A local chart is read now. A remote one
// comes from the cache; when it is not there (or its entry expired), Chart
// starts one background fetch for everyone asking, returns ErrFetching, and
// calls notify when the fetch has ended. A failed fetch's error is returned
// for RetryAfter.
func (c *Charts) Chart(r Ref, notify func()) (*chart.Chart, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if r.Kind() == KindLocal {
		return loadLocal(r)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[r]
	if e != nil && e.done && !c.fresh(r, e) {
		e = nil
	}
	if e == nil {
		if c.ctx.Err() != nil {
			return nil, fmt.Errorf("chart cache closed")
		}
		e = &entry{}
		c.entries[r] = e
		c.evict()
		c.fetches.Add(1)
		go c.fetch(r, e)
	}
	if !e.done {
		if notify != nil {
			e.waiters = append(e.waiters, notify)
		}
		return nil, fmt.Errorf("%w: %s", ErrFetching, r)
	}
	return e.chart, e.err
}

func (c *Charts) fresh(r Ref, e *entry) bool {
	age := time.Since(e.at)
	if e.err != nil {
		return age < c.o.RetryAfter
	}
	return r.Exact() || age < c.o.ResolveTTL
}

// evict drops the oldest finished entries above MaxEntries.
func (c *Charts) evict() {
	if len(c.entries) <= c.o.MaxEntries {
		return
	}
	type aged struct {
		r  Ref
		at time.Time
	}
	var done []aged
	for r, e := range c.entries {
		if e.done {
			done = append(done, aged{r, e.at})
		}
	}
	slices.SortFunc(done, func(a, b aged) int { return a.at.Compare(b.at) })
	for _, d := range done {
		if len(c.entries) <= c.o.MaxEntries {
			return
		}
		delete(c.entries, d.r)
	}
}

func (c *Charts) fetch(r Ref, e *entry) {
	defer c.fetches.Done()
	start := time.Now()
	ch, err := c.load(r)
	if c.ctx.Err() != nil {
		err = errors.Join(err, c.ctx.Err())
	}
	c.mu.Lock()
	e.done, e.chart, e.err, e.at = true, ch, err, time.Now()
	waiters := e.waiters
	e.waiters = nil
	c.mu.Unlock()
	if err != nil {
		c.o.Log.Error(err, "Chart fetch failed", "chart", r.String(), "duration", time.Since(start))
	} else {
		c.o.Log.Info("Chart fetched", "chart", r.String(), "version", ch.Metadata.Version, "duration", time.Since(start))
	}
	for _, notify := range waiters {
		notify()
	}
}

// load resolves r and downloads its content unless that version is cached.
func (c *Charts) load(r Ref) (*chart.Chart, error) {
	key, href, err := c.f.resolve(r)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	ch := c.content[key]
	c.mu.Unlock()
	if ch != nil {
		return ch, checkVersion(r, ch)
	}
	if ch, err = c.f.download(r, href); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.content) >= c.o.MaxEntries {
		for k := range c.content { // drop any one: the cache is bounded, not ordered
			delete(c.content, k)
			break
		}
	}
	c.content[key] = ch
	c.mu.Unlock()
	return ch, nil
}

// Close refuses new fetches and waits for those in flight (each bounded by
// Timeout) until ctx ends.
func (c *Charts) Close(ctx context.Context) error {
	c.cancel()
	done := make(chan struct{})
	go func() {
		c.fetches.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("chart fetches still in flight: %w", ctx.Err())
	}
}
