package shard

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"

	"github.com/clustershard/clustershard/internal/metrics"
)

type phase int

const (
	phaseFree      phase = iota // not owned here
	phaseOwned                  // Lease held, manager spawned or spawning
	phaseDraining               // handing over: no new callback starts, the running ones finish and still write
	phaseReleasing              // handing over: stopping, then releasing the Lease
	phaseLosing                 // lost: stopping, the Lease is not ours to write
)

// cluster is this replica's view of one cluster it owns or is giving up.
type cluster struct {
	phase phase
	epoch uint64
	since time.Time
	// handler serialises the Handler calls of the cluster; users counts
	// its WithOwnership callbacks. A stop waits for both at most
	// StopTimeout.
	handler handlerLock
	users   callbacks

	// Until its manager first runs after an acquisition: when the ring
	// assigned the cluster here and since when it had no running manager.
	assigned, unmanagedSince time.Time
	// replaced is the Lease version our acquisition replaced ("" when it
	// created the Lease): a cache still showing it has not seen our write,
	// which was sent at sent.
	replaced string
	sent     time.Time
	// written is the Lease version our acquisition wrote: the
	// manager-running mark applies to that version only (window.go).
	written string
	// transfer is the change of owner the acquisition made, reported once
	// the manager first runs (nil for a re-acquisition by this process).
	transfer *Transfer
}

// Coordinator is the shard coordinator of one replica: it holds the
// replica's membership Lease, computes the ring over live members and
// acquires, hands over and releases cluster Leases by the numbered rules of
// the package documentation (doc.go). It is the registry's Fence.
type Coordinator struct {
	o      Options
	log    logr.Logger
	member *membership
	obs    *observer
	limit  *rate.Limiter
	kick   chan struct{}
	writes atomic.Int64

	wanted map[string]time.Time // step goroutine only: when a cluster was first seen assigned here
	settle settleState          // step goroutine only: the cold-start settle

	mu       sync.Mutex
	clusters map[string]*cluster
	leaving  bool
	view     View
	ring     *Ring
	notes    map[string]string // the last plan's placement notes
	ready    atomic.Bool       // a first pass was made
	caughtUp atomic.Bool       // every assigned cluster acquired once (or CatchUpTimeout passed)
	crashed  atomic.Bool       // test hook: behave as a dead process
	// unownedSince is the last pass's Unowned, for the next; acquireErr
	// the last failed acquisition of each cluster (step only).
	unownedSince map[string]Unowned
	acquireErr   map[string]error
	// told are the unowned clusters told to Options.Unowned in this run of
	// passes as the Reporter (step only).
	told map[string]bool
	// timings are the timings last logged per membership Lease that
	// publishes other timings than ours.
	timings map[string]string
	// notStopped are clusters whose manager's stop timed out when they were
	// lost: their Lease is marked abandoned, never released (sweep).
	notStopped map[string]bool
	// doubt are the remote writes per cluster that may still land (see
	// WriteBegan): their Lease is abandoned, never released.
	doubt map[string]*writeDoubt
	// letGo are the clusters handed over whose new manager is not seen
	// running yet (window.go); windowLifted ends the window's pacing (a
	// shutdown running out of time).
	letGo        map[string]letGo
	windowLifted atomic.Bool
	// acquiring are the clusters whose acquisition is on its way, acquired
	// the outcomes of those that ended since the last pass took them, and
	// acquireSlots bounds them (startAcquisitions).
	acquiring    map[string]bool
	acquired     []acquisition
	acquireSlots chan struct{}
	// acquireClosed: no acquisition starts or records any more (Run
	// returning; closeAcquisitions).
	acquireClosed bool
	// ownWrites are, per cluster Lease, the version our last release
	// replaced, until the cache lists another (ownwrites.go).
	ownWrites map[string]string
}

// New returns a Coordinator; Run starts it.
func New(o Options) (*Coordinator, error) {
	if err := o.defaults(); err != nil {
		return nil, fmt.Errorf("shard coordinator: %w", err)
	}
	c := &Coordinator{
		o:        o,
		log:      o.Logger,
		obs:      newObserver(o.LeaseDuration, o.RenewDeadline, o.Clock.Now()),
		limit:    rate.NewLimiter(rate.Limit(o.MovesPerSecond), max(1, int(o.MovesPerSecond))),
		kick:     make(chan struct{}, 1),
		clusters: map[string]*cluster{}, notStopped: map[string]bool{}, timings: map[string]string{}, acquireErr: map[string]error{},
		doubt: map[string]*writeDoubt{}, wanted: map[string]time.Time{}, letGo: map[string]letGo{},
		ownWrites: map[string]string{}, acquiring: map[string]bool{}, acquireSlots: make(chan struct{}, acquireParallelism),
	}
	c.member = &membership{o: &c.o, onLapse: c.Kick, onGraceEnd: c.graceEnded, writes: func(verb string) { c.countWrite(verb, "membership") }}
	c.o.Logger = c.log
	return c, nil
}

// joined returns when the current membership epoch began.
func (c *Coordinator) joined() time.Time {
	c.member.mu.Lock()
	defer c.member.mu.Unlock()
	return c.member.since
}

// Kick asks for a prompt re-evaluation (on a Lease or RemoteCluster change).
func (c *Coordinator) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// OwnershipWrites returns how many API writes (attempts, successful or not)
// ownership has cost so far.
func (c *Coordinator) OwnershipWrites() int64 { return c.writes.Load() }

func (c *Coordinator) countWrite(verb, resource string) {
	c.writes.Add(1)
	metrics.OwnershipWrites.WithLabelValues(verb, resource).Inc()
}

// Ready reports whether the coordinator holds its membership, has made its
// first pass and has caught up: acquired every cluster the ring assigned to
// it, once, or waited CatchUpTimeout for that. It is the replica's readiness,
// which paces a StatefulSet rollout.
func (c *Coordinator) Ready() bool {
	_, ok := c.member.held()
	return ok && c.ready.Load() && c.caughtUp.Load()
}

// catchUp latches caughtUp once every cluster in assign that maps to this
// replica is owned here, or once CatchUpTimeout has passed since joining.
func (c *Coordinator) catchUp(assign map[string]string) {
	if c.caughtUp.Load() {
		return
	}
	missing := 0
	c.mu.Lock()
	for n, m := range assign {
		if st := c.clusters[n]; m == c.o.Identity && (st == nil || st.phase != phaseOwned) {
			missing++
		}
	}
	c.mu.Unlock()
	switch {
	case missing == 0:
		c.log.Info("Caught up: every assigned cluster acquired", "after", c.o.Clock.Since(c.joined()).Round(time.Millisecond))
	case c.o.Clock.Since(c.joined()) >= c.o.CatchUpTimeout:
		c.log.Info("Not every assigned cluster acquired within the catch-up timeout; ready anyway", "missing", missing, "timeout", c.o.CatchUpTimeout)
	default:
		return
	}
	c.caughtUp.Store(true)
}

// Run holds membership and coordinates ownership until ctx ends, then hands
// every cluster over (rule 5) within shutdownTimeout and releases membership.
func (c *Coordinator) Run(ctx context.Context, shutdownTimeout time.Duration) error {
	memberCtx, stopMember := context.WithCancel(context.WithoutCancel(ctx))
	memberDone := make(chan struct{})
	go func() {
		defer close(memberDone)
		c.member.run(memberCtx)
	}()
	ticker := time.NewTicker(c.o.RetryPeriod / 2)
	defer ticker.Stop()
	for {
		c.step(ctx)
		c.ready.Store(true)
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			err := c.shutdown(sctx)
			cancel()
			// An acquisition still on its way (a shutdown that timed out)
			// records nothing now, and ends before membership does.
			c.closeAcquisitions()
			stopMember()
			<-memberDone
			c.member.lost()
			return err
		case <-ticker.C:
		case <-c.kick:
		}
	}
}

// acquireParallelism bounds the acquisitions (Lease writes) in flight at once.
const acquireParallelism = 8
