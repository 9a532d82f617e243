package shard

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/metrics"
)

// membership holds this replica's membership Lease with a client-go
// LeaderElector on a Lease of its own, and judges its validity on the local
// monotonic clock: membership is valid until RenewDeadline after the moment
// the last successful renewal was SENT. Others consider it expired only
// LeaseDuration after they OBSERVED that renewal, which is later, so the gap
// (LeaseDuration - RenewDeadline) is the safety margin for pauses and
// in-flight writes.
//
// Every lapse of validity (a renewal that came too late, a lost Lease)
// increments the epoch: cluster ownership taken in an older epoch is void and
// must be re-acquired.
type membership struct {
	o       *Options
	onLapse func() // called (without locks) when the epoch changes
	writes  func(verb string)

	mu         sync.Mutex
	validUntil time.Time
	lastSent   time.Time // when the last successful renewal was sent
	epoch      uint64
	since      time.Time // start of the current epoch

	// pub is what the next renewal publishes in the Lease's labels.
	pub publication

	// pause, when set by tests, blocks the renew path inside the lock: a
	// frozen replica as seen by the API server.
	pauseMu sync.Mutex
	pause   chan struct{}
}

// valid returns the validity deadline and the epoch, and whether membership
// is valid now.
func (m *membership) valid() (time.Time, uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.validUntil, m.epoch, m.o.Clock.Now().Before(m.validUntil)
}

// publish sets what the next renewals write into the membership Lease's
// labels: the hash of the ring last computed and how many clusters are
// tracked. It costs no write of its own.
func (m *membership) publish(ring string, tracked int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pub = publication{ring: ring, tracked: tracked}
}

// labels returns the membership Lease's labels for the next write.
func (m *membership) labels() map[string]string {
	m.mu.Lock()
	l := m.pub.labels()
	m.mu.Unlock()
	l[v1alpha1.LeaseRoleLabel] = "member"
	l[v1alpha1.LeaseDurationLabel] = m.o.LeaseDuration.String()
	l[v1alpha1.RenewDeadlineLabel] = m.o.RenewDeadline.String()
	return l
}

// renewed records a successful renewal sent at sent, now that its answer
// came. The lapse is judged at answer time: a renewal sent in time but
// answered after validity ended still starts a new epoch, because between
// the end of validity and the answer others may have judged this replica
// expired (and ownership taken before must stay void).
func (m *membership) renewed(sent time.Time) {
	m.mu.Lock()
	lapsed := !m.validUntil.IsZero() && m.o.Clock.Now().After(m.validUntil)
	if lapsed || m.validUntil.IsZero() {
		m.epoch++
		m.since = sent
	}
	m.validUntil = sent.Add(m.o.RenewDeadline)
	m.lastSent = sent
	m.mu.Unlock()
	m.o.journal(sent, JournalRenewed, "")
	if lapsed {
		m.o.Logger.Info("Membership lapsed and was renewed late: ownership from before is void")
		m.onLapse()
	}
}

// bound returns the latest instant a remote write sent now may still be
// processed by its server without another replica possibly owning what this
// one owns: others judge this replica expired no sooner than LeaseDuration
// after they saw its last renewal, which was sent at lastSent. Half the
// margin between lease duration and renew deadline is kept for the write's
// way to the server. Zero when membership is not valid.
func (m *membership) bound() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.o.Clock.Now().Before(m.validUntil) {
		return time.Time{}
	}
	return m.lastSent.Add(m.o.RenewDeadline + (m.o.LeaseDuration-m.o.RenewDeadline)/2)
}

// lost voids membership at once.
func (m *membership) lost() {
	m.mu.Lock()
	m.validUntil = time.Time{}
	m.epoch++
	m.mu.Unlock()
	m.o.journal(m.o.Clock.Now(), JournalVoid, "")
	m.onLapse()
}

// run holds the membership Lease until ctx ends, re-joining after a loss.
// On return the Lease is released.
func (m *membership) run(ctx context.Context) {
	for ctx.Err() == nil {
		lease := &resourcelock.LeaseLock{
			LeaseMeta:  leaseMeta(m.o.Namespace, MemberLeaseName(m.o.Identity)),
			Client:     m.o.Kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: m.o.self},
			Labels:     m.labels(),
		}
		lock := &recordingLock{Interface: lease, lease: lease, m: m}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   m.o.LeaseDuration,
			RenewDeadline:   m.o.RenewDeadline,
			RetryPeriod:     m.o.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            "clustershard-membership",
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { m.o.Logger.Info("Membership acquired") },
				OnStoppedLeading: func() {
					m.o.Logger.Info("Membership lost: fencing every cluster")
					m.lost()
				},
			},
		})
		if err != nil {
			m.o.Logger.Error(err, "Invalid membership elector configuration")
			return
		}
		le.Run(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(m.o.RetryPeriod):
		}
	}
}

// recordingLock wraps the membership LeaseLock: it records when each
// successful write was sent, counts the writes and sets the labels each
// write publishes (only the elector's goroutine writes, so lease.Labels
// needs no lock).
type recordingLock struct {
	resourcelock.Interface
	lease *resourcelock.LeaseLock
	m     *membership
}

func (l *recordingLock) waitIfPaused() {
	l.m.pauseMu.Lock()
	p := l.m.pause
	l.m.pauseMu.Unlock()
	if p != nil {
		<-p
	}
}

// Create records a created membership Lease as a renewal.
func (l *recordingLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.waitIfPaused()
	l.lease.Labels = l.m.labels()
	sent := l.m.o.Clock.Now()
	err := l.Interface.Create(ctx, ler)
	l.m.writes("create")
	if err == nil && ler.HolderIdentity == l.m.o.self {
		l.m.renewed(sent)
	}
	return err
}

// Update records a renewed membership Lease.
func (l *recordingLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.waitIfPaused()
	l.lease.Labels = l.m.labels()
	sent := l.m.o.Clock.Now()
	err := l.Interface.Update(ctx, ler)
	l.m.writes("update")
	if ler.HolderIdentity == l.m.o.self {
		if err == nil {
			l.m.renewed(sent)
		} else {
			metrics.MembershipRenewFailures.Inc()
		}
	}
	return err
}
