package shard

import "time"

// Journal events: what a replica records about its own write authority, for
// an external checker (the drill's invariant I1). Times are wall-clock times
// of this machine.
const (
	// JournalRenewed: membership renewal sent at Time succeeded; authority
	// lasts until Time + RenewDeadline unless renewed again.
	JournalRenewed = "renewed"
	// JournalVoid: membership voided at Time (lost, released on exit; for
	// a renewal answered past the grace, Time is when the validity before
	// it ended, since no write went after).
	JournalVoid = "void"
	// JournalResumed: the answer of the last renewal came at Time, after
	// the validity of the one before had ended but within the grace
	// (RenewalGrace): no write went between that end and Time, and
	// authority goes on from Time in the same epoch.
	JournalResumed = "resumed"
	// JournalOwned: authority over Cluster began at (or after) Time.
	JournalOwned = "owned"
	// JournalReleasing and JournalLost: no new write for Cluster starts
	// after Time (hand-over or loss began); writes already under way may
	// still finish until JournalStopped.
	JournalReleasing = "releasing"
	JournalLost      = "lost"
	// JournalStopped: the remote manager of Cluster stopped and every write
	// for it in flight finished (Time): authority over Cluster has ended.
	JournalStopped = "stopped"
	// JournalReleased: the Lease of Cluster was written free, abandoned or
	// deleted (Time: after the write), once its manager stopped.
	JournalReleased = "released"
	// JournalAbandoned is the Detail of a JournalReleased entry whose Lease
	// was left to expire (v1alpha1.AbandonedAnnotation) instead of written
	// free: a remote write of the cluster went unanswered and may land
	// until its fence deadline, so the next owner takes it a lease duration
	// later.
	JournalAbandoned = "abandoned"
	// JournalRunning: the remote manager of Cluster runs here (Time).
	JournalRunning = "running"
	// JournalExit: the process shut down cleanly (Time); Detail lists the
	// goroutines started since its start that are still running (leaks),
	// empty when there are none.
	JournalExit = "exit"
)

// JournalEntry is one record of Options.Journal.
type JournalEntry struct {
	// Time is the wall-clock time of the event.
	Time time.Time `json:"time"`
	// Replica is the recording replica.
	Replica string `json:"replica"`
	// Incarnation is the recording process of that replica (see
	// Options.Incarnation): a checker keys authority by both.
	Incarnation string `json:"incarnation,omitempty"`
	// Event is one of the Journal* constants.
	Event string `json:"event"`
	// Cluster is the cluster of a per-cluster event.
	Cluster string `json:"cluster,omitempty"`
	// Detail is free text of an event (JournalExit: leaked goroutines;
	// JournalReleased: JournalAbandoned when the Lease was left to expire).
	Detail string `json:"detail,omitempty"`
}

// journal records an entry when Options.Journal is set.
func (o *Options) journal(at time.Time, event, cluster string) {
	o.journalDetail(at, event, cluster, "")
}

// journalDetail records an entry with a Detail when Options.Journal is set.
func (o *Options) journalDetail(at time.Time, event, cluster, detail string) {
	if o.Journal != nil {
		o.Journal(JournalEntry{Time: at, Replica: o.Identity, Incarnation: o.Incarnation, Event: event, Cluster: cluster, Detail: detail})
	}
}
