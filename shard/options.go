package shard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure a Coordinator.
type Options struct {
	// Identity is this replica's name (--replica-id, default the pod name):
	// its ring member and the name of its membership Lease.
	Identity string
	// Incarnation tells this process apart from any other started with the
	// same Identity (--incarnation, default the pod UID; random when
	// empty). Leases are held by HolderIdentity(Identity, Incarnation).
	Incarnation string
	// Namespace holds the membership and cluster Leases.
	Namespace string
	// Client writes Leases and makes the fresh reads that decide a takeover
	// (a direct, uncached client).
	Client client.Client
	// Reader lists Leases on every pass; a cached reader (the manager's
	// client) in production. Default: Client.
	Reader client.Reader
	// Kube is the typed clientset the membership elector uses.
	Kube kubernetes.Interface
	// Clusters lists the names of the RemoteClusters to shard.
	Clusters func() ([]string, error)
	// Placements returns the RemoteClusters' placement constraints by name
	// (spec.placement); nil: none. Each pass calls it right after Clusters,
	// on the same goroutine, so both may come from one list.
	Placements func() (map[string]Placement, error)
	// Handler is told about acquired and lost clusters.
	Handler Handler
	// Orphaned, when set, is called when this replica hands a cluster over
	// with no successor (no other replica on the ring: the last one shuts
	// down, or is cordoned): after the cluster's manager stopped, before its
	// Lease is released, while membership is valid. The replica marks the
	// RemoteCluster as owned by no one. An error is logged; the release goes
	// on.
	Orphaned func(ctx context.Context, cluster, why string) error
	// Transferred, when set, is told of every change of owner this replica
	// makes, once the new manager first runs (the replica records an Event).
	Transferred func(Transfer)
	// Unowned, when set, is told once, while this replica is the Reporter,
	// of each cluster it has judged unowned (no replica may run it) for
	// UnownedAfter; told again after the cluster was owned in between or
	// this replica was not the Reporter. Called on the pass's goroutine, it
	// must not block: the replica enqueues the cluster's sources, whose
	// condition then says so. Clusters free for a moment (a cold start, a
	// take-over) are not told.
	Unowned      func(cluster string)
	UnownedAfter time.Duration
	// Logger is the parent logger; it should name the replica (the binary
	// adds replica=<identity> to every line), the coordinator adds nothing.
	Logger logr.Logger
	// Journal, when set, receives the replica's authority events (see
	// JournalEntry) synchronously; the drill's invariant checker reads them.
	Journal func(JournalEntry)
	// Clock tells the time of every ownership decision: when a Lease was
	// seen to change, when one is free, until when a write may go. Default
	// the real clock, whose readings carry the monotonic clock the fence
	// relies on; tests of the rules pass a fake one. Tickers and waits use
	// real time.
	Clock clock.PassiveClock

	// LeaseDuration, RenewDeadline and RetryPeriod time the membership Lease
	// (defaults 15s, 10s, 2s), as in client-go's leaderelection.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// StopTimeout bounds the stop of one remote manager on hand-over (default 10s).
	StopTimeout time.Duration
	// MovesPerSecond rate-limits hand-overs during rebalancing (default 10);
	// graceful shutdown hands everything over at once.
	MovesPerSecond float64
	// HandoverWindow paces planned hand-overs (rebalancing, cordon,
	// shutdown): this replica lets go of at most that many clusters per
	// successor whose new manager it has not yet seen running (the
	// successor marks the Lease, v1alpha1.ManagerRunningAnnotation), so a
	// cluster waits for its successor's spawn alone, not behind a queue of
	// spawns, while the clusters not yet let go keep running here (default
	// DefaultHandoverWindow; negative: no window). A cluster let go counts
	// against the window for at most HandoverWindowTimeout (default
	// StopTimeout / 2), so a successor that never marks (an older version,
	// a remote that does not answer) slows the hand-over without stalling
	// it. Graceful shutdown lifts the window once only the worst case of a
	// hand-over (2 × StopTimeout + RenewDeadline) is left of its timeout.
	HandoverWindow        int
	HandoverWindowTimeout time.Duration
	// CatchUpTimeout bounds how long a joining replica reports not ready
	// while it has not yet acquired every cluster the ring assigns to it
	// (default 2 × LeaseDuration): a StatefulSet rollout waits for each new
	// pod to take its share before it restarts the next one, instead of
	// piling the fleet onto the replicas restarted last.
	CatchUpTimeout time.Duration
	// Ring configures the consistent-hash ring.
	Ring RingOptions
	// ExpectedReplicas is how many replicas the fleet is meant to have (the
	// StatefulSet's replicas; 0: unknown). At a cold start a replica takes
	// clusters once that many are on the ring (see settle.go).
	ExpectedReplicas int
	// SettleWindow is how long the ring's members must stay unchanged at a
	// cold start before a replica takes clusters, when ExpectedReplicas
	// are not all there yet (default 3 × RetryPeriod); SettleTimeout
	// bounds that wait (default LeaseDuration).
	SettleWindow, SettleTimeout time.Duration

	self string // HolderIdentity(Identity, Incarnation), set by defaults
}

// Defaults of Options, also the defaults of the replica's flags.
const (
	DefaultLeaseDuration  = 15 * time.Second
	DefaultRenewDeadline  = 10 * time.Second
	DefaultRetryPeriod    = 2 * time.Second
	DefaultStopTimeout    = 10 * time.Second
	DefaultMovesPerSecond = 10
	DefaultHandoverWindow = 3
)

func (o *Options) defaults() error {
	var errs []error
	if o.Identity == "" {
		errs = append(errs, errors.New("identity is required (--replica-id or POD_NAME)"))
	}
	if len(o.Identity) > 63 {
		errs = append(errs, fmt.Errorf("identity %q is longer than 63 characters", o.Identity))
	}
	if o.Incarnation == "" {
		o.Incarnation = NewIncarnation()
	}
	if err := ValidateIncarnation(o.Incarnation); err != nil {
		errs = append(errs, err)
	}
	if strings.Contains(o.Identity, incarnationSeparator) {
		errs = append(errs, fmt.Errorf("identity %q may not contain %q", o.Identity, incarnationSeparator))
	}
	o.self = HolderIdentity(o.Identity, o.Incarnation)
	if o.Namespace == "" {
		errs = append(errs, errors.New("namespace is required"))
	}
	if o.Client == nil || o.Kube == nil || o.Clusters == nil || o.Handler == nil {
		errs = append(errs, errors.New("client, kube clientset, cluster lister and handler are required"))
	}
	if o.Reader == nil {
		o.Reader = o.Client
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = DefaultRenewDeadline
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = DefaultRetryPeriod
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.HandoverWindow == 0 {
		o.HandoverWindow = DefaultHandoverWindow
	}
	if o.HandoverWindowTimeout == 0 {
		o.HandoverWindowTimeout = o.StopTimeout / 2
	}
	if o.HandoverWindowTimeout < 0 {
		errs = append(errs, fmt.Errorf("hand-over window timeout %v must not be negative", o.HandoverWindowTimeout))
	}
	if o.CatchUpTimeout == 0 {
		o.CatchUpTimeout = 2 * o.LeaseDuration
	}
	if o.SettleWindow == 0 {
		o.SettleWindow = 3 * o.RetryPeriod
	}
	if o.SettleTimeout == 0 {
		o.SettleTimeout = o.LeaseDuration
	}
	if o.ExpectedReplicas < 0 || o.SettleWindow < 0 || o.SettleTimeout < 0 {
		errs = append(errs, fmt.Errorf("expected replicas (%d), settle window (%v) and settle timeout (%v) must not be negative", o.ExpectedReplicas, o.SettleWindow, o.SettleTimeout))
	}
	if o.MovesPerSecond == 0 {
		o.MovesPerSecond = DefaultMovesPerSecond
	}
	if err := ValidateTiming(o.LeaseDuration, o.RenewDeadline, o.RetryPeriod); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ValidateTiming checks the membership timings: what client-go's elector
// requires (lease duration > renew deadline > 1.2 x retry period > 0;
// otherwise it refuses to run and the replica would never join), and a
// margin of at least one retry period between the renew deadline, where a
// replica's fence ends, and the lease duration, after which others take its
// clusters: the margin absorbs the time between a renewal and its
// observation and the drift of clock rates.
func ValidateTiming(lease, renew, retry time.Duration) error {
	var errs []error
	if retry <= 0 {
		errs = append(errs, fmt.Errorf("retry period %v must be positive", retry))
	}
	if renew <= time.Duration(leaderelection.JitterFactor*float64(retry)) {
		errs = append(errs, fmt.Errorf("renew deadline %v must be greater than %.1f x the retry period %v (client-go's elector refuses it otherwise)", renew, leaderelection.JitterFactor, retry))
	}
	if lease <= renew {
		errs = append(errs, fmt.Errorf("lease duration %v must be greater than renew deadline %v", lease, renew))
	} else if lease-renew < retry {
		errs = append(errs, fmt.Errorf("lease duration %v leaves a margin of %v over the renew deadline %v; it must be at least the retry period %v", lease, lease-renew, renew, retry))
	}
	return errors.Join(errs...)
}
