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
// Past the end of validity writes are fenced, but ownership stands for a
// grace more (RenewalGrace): a renewal sent in time whose answer comes late,
// under load, within the grace keeps the epoch, so the replica resumes
// writing instead of stopping every manager and taking every cluster again.
// That is safe because others wait a whole LeaseDuration from when they saw
// the renewal before (RenewDeadline plus at most a quarter of the margin):
// a renewal answered by then was applied by then, and a taker confirms
// expiry by a fresh read, which sees it.
//
// Every lapse of validity past the grace (a renewal answered later, none at
// all, a lost Lease) increments the epoch: cluster ownership taken in an
// older epoch is void and must be re-acquired.
type membership struct {
	o       *Options
	onLapse func() // called (without locks) when the epoch changes or writes resume
	// onGraceEnd is called (without locks, on a timer's goroutine) when
	// the grace after the current validity ends, so what was held stops
	// then, not at the next pass.
	onGraceEnd func()
	writes     func(verb string)

	mu         sync.Mutex
	validUntil time.Time
	lastSent   time.Time // when the last successful renewal was sent
	epoch      uint64
	since      time.Time // start of the current epoch

	// pub is what the next renewal publishes in the Lease's labels.
	pub publication

	// graceEnd calls onGraceEnd.
	graceEnd *time.Timer

	// pause, when set by tests, blocks the renew path inside the lock: a
	// frozen replica as seen by the API server. sending and answering
	// block a renewal once its send time is taken: before it goes (a
	// request slow on its way) or after its answer came (an answer
	// processed late).
	pauseMu   sync.Mutex
	pause     chan struct{}
	sending   chan struct{}
	answering chan struct{}
}

// valid returns the validity deadline and the epoch, and whether membership
// is valid now: whether writes may go.
func (m *membership) valid() (time.Time, uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.validUntil, m.epoch, m.o.Clock.Now().Before(m.validUntil)
}

// writable reports whether membership is valid now.
func (m *membership) writable() bool {
	_, _, ok := m.valid()
	return ok
}

// held returns the epoch and whether ownership taken in it still stands:
// membership is valid, or its validity ended less than the grace ago and a
// renewal answered within it keeps the epoch. Writes are fenced (valid)
// from the end of validity; remote managers run on until the grace ends.
func (m *membership) held() (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch, !m.validUntil.IsZero() && m.o.Clock.Now().Before(m.validUntil.Add(m.grace()))
}

// heldFor returns how long ownership stands from now (zero when it does
// not): until the grace after the end of validity.
func (m *membership) heldFor() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.validUntil.IsZero() {
		return 0
	}
	return max(0, m.validUntil.Add(m.grace()).Sub(m.o.Clock.Now()))
}

// grace is how long past the end of validity a renewal's answer may come
// with ownership kept.
func (m *membership) grace() time.Duration {
	return RenewalGrace(m.o.LeaseDuration, m.o.RenewDeadline)
}

// RenewalGrace is how long past the end of its validity (renew deadline after
// the last renewal was sent) a replica keeps the ownership it holds, its
// writes fenced, waiting for the answer of a renewal on its way: a quarter of
// the margin between lease duration and renew deadline. Others judge it
// expired no sooner than a lease duration after they saw that last renewal.
func RenewalGrace(leaseDuration, renewDeadline time.Duration) time.Duration {
	return max(0, (leaseDuration-renewDeadline)/4)
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
// came. The lapse is judged at answer time. An answer after validity ended
// but within the grace keeps the epoch (writes were fenced in between and go
// on now). One later than that starts a new epoch: from the grace's end
// others may judge this replica expired, so ownership from before is void.
func (m *membership) renewed(sent time.Time) {
	m.mu.Lock()
	now := m.o.Clock.Now()
	late := !m.validUntil.IsZero() && now.After(m.validUntil)
	lapsed := late && !now.Before(m.validUntil.Add(m.grace())) // as held judges it
	ended, fenced := m.validUntil, now.Sub(m.validUntil)
	if lapsed || m.validUntil.IsZero() {
		m.epoch++
		m.since = sent
	}
	m.validUntil = sent.Add(m.o.RenewDeadline)
	m.lastSent = sent
	if m.onGraceEnd != nil {
		d := m.validUntil.Add(m.grace()).Sub(now)
		if m.graceEnd == nil {
			m.graceEnd = time.AfterFunc(d, m.onGraceEnd)
		} else {
			m.graceEnd.Reset(d)
		}
	}
	m.mu.Unlock()
	m.o.journal(sent, JournalRenewed, "")
	if !late {
		return
	}
	// Past the grace, authority ended with the validity before (writes
	// were fenced from then on); within it, it goes on from the answer.
	event, at, outcome, msg := JournalResumed, now, metrics.LateRenewalKept,
		"Membership renewed late, within the grace: ownership kept, writes were fenced meanwhile"
	if lapsed {
		event, at, outcome, msg = JournalVoid, ended, metrics.LateRenewalVoided,
			"Membership lapsed and was renewed past the grace: ownership from before is void"
	}
	m.o.journal(at, event, "")
	metrics.MembershipLateRenewals.WithLabelValues(outcome).Inc()
	m.o.Logger.Info(msg, "fencedFor", fenced.Round(time.Millisecond).String(), "grace", m.grace().String())
	m.onLapse()
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
	if m.graceEnd != nil {
		m.graceEnd.Stop() // nothing held is left to stop
	}
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

func (l *recordingLock) waitIfPaused() { l.wait(&l.m.pause) }

// wait blocks while the test hook *ch is set.
func (l *recordingLock) wait(ch *chan struct{}) {
	l.m.pauseMu.Lock()
	p := *ch
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
	l.wait(&l.m.sending)
	err := l.Interface.Update(ctx, ler)
	l.wait(&l.m.answering)
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
