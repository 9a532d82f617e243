package shard

import (
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// observer judges liveness by locally observed time, as client-go's
// leaderelection does: a Lease is live while it has changed (new
// resourceVersion) within the last LeaseDuration of this replica's monotonic
// clock. A remote renewTime is never compared with the local clock.
type observer struct {
	leaseDuration time.Duration
	renewDeadline time.Duration
	started       time.Time
	seen          map[string]observation // by Lease name
}

type observation struct {
	resourceVersion string    // "" while the Lease is absent
	changed         time.Time // local time the current version (or absence) was first seen
	holder          string    // the last non-empty holder seen, across versions
	// lease and renew are the timings a membership Lease publishes (zero
	// when it publishes none).
	lease, renew time.Duration
	// firstSeen is when the Lease was first seen at all; prev is the
	// holder before the current one, as last seen.
	firstSeen time.Time
	prev      tenure
}

// tenure is a holder's time on a membership Lease, as last seen.
type tenure struct {
	holder       string
	lastRenewal  time.Time // local time its last version was first seen
	lease, renew time.Duration
}

func newObserver(leaseDuration, renewDeadline time.Duration, now time.Time) *observer {
	return &observer{leaseDuration: leaseDuration, renewDeadline: renewDeadline, started: now, seen: map[string]observation{}}
}

// published reads the timings a membership Lease publishes; zero for a
// label that is absent or not a positive duration.
func published(l *coordinationv1.Lease) (lease, renew time.Duration) {
	parse := func(key string) time.Duration {
		d, err := time.ParseDuration(l.Labels[key])
		if err != nil || d <= 0 {
			return 0
		}
		return d
	}
	return parse(v1alpha1.LeaseDurationLabel), parse(v1alpha1.RenewDeadlineLabel)
}

// holderLease names the membership Lease whose timings govern the Lease
// named name: itself for a membership Lease, the last holder's for a
// cluster Lease.
func (o *observer) holderLease(name string) string {
	if strings.HasPrefix(name, MemberLeasePrefix) {
		return name
	}
	if h := o.seen[name].holder; h != "" {
		return MemberLeaseName(HolderName(h))
	}
	return ""
}

// leaseFor is how long the Lease named name must be seen unchanged before
// its holder is judged gone: the longer of this replica's lease duration
// and the one its holder publishes, and always more than the holder's
// published renew deadline (past which the holder has fenced itself).
func (o *observer) leaseFor(name string) time.Duration {
	d := o.leaseDuration
	if m := o.holderLease(name); m != "" {
		ob := o.seen[m]
		d = max(d, ob.lease, ob.renew+o.leaseDuration-o.renewDeadline)
	}
	return d
}

// renewFor is the renew deadline of the holder of the Lease named name:
// the longer of this replica's and the one it publishes.
func (o *observer) renewFor(name string) time.Duration {
	d := o.renewDeadline
	if m := o.holderLease(name); m != "" {
		d = max(d, o.seen[m].renew)
	}
	return d
}

// heldFor is how long after its last renewal was seen the holder of the
// Lease named name may still hold its clusters: its renew deadline and the
// grace after it, by the timings it publishes (this replica's when none).
func (o *observer) heldFor(name string) time.Duration {
	lease, renew := o.leaseDuration, o.renewDeadline
	if m := o.holderLease(name); m != "" {
		if ob := o.seen[m]; ob.lease > 0 && ob.renew > 0 {
			lease, renew = ob.lease, ob.renew
		}
	}
	return o.renewFor(name) + RenewalGrace(lease, renew)
}

// observe records the current version of a Lease and returns when it last changed.
func (o *observer) observe(l *coordinationv1.Lease, now time.Time) time.Time {
	ob, ok := o.seen[l.Name]
	if !ok || ob.resourceVersion != l.ResourceVersion {
		prev := ob
		ob = observation{resourceVersion: l.ResourceVersion, changed: now, holder: prev.holder, firstSeen: prev.firstSeen, prev: prev.prev}
		if !ok {
			ob.firstSeen = now
		}
		ob.lease, ob.renew = published(l)
		if h := holderOf(l); h != "" {
			if prev.holder != "" && prev.holder != h {
				ob.prev = tenure{holder: prev.holder, lastRenewal: prev.changed, lease: prev.lease, renew: prev.renew}
			}
			ob.holder = h
		}
		o.seen[l.Name] = ob
	}
	return ob.changed
}

// absent records that the cluster Leases seen before and not in present
// are gone: their absence counts as a change, seen now.
func (o *observer) absent(present map[string]*coordinationv1.Lease, now time.Time) {
	for name, ob := range o.seen {
		if _, ok := present[name]; ok || ob.resourceVersion == "" || !strings.HasPrefix(name, ClusterLeasePrefix) {
			continue
		}
		o.seen[name] = observation{changed: now, holder: ob.holder}
	}
}

// replacedFor reports whether holder, which another process has replaced on
// the membership Lease named name, was last seen renewing it longer ago than
// its lease duration (the longer of ours and the one it published): its
// authority has ended whatever the timings of the process that replaced it.
// A holder never seen there counts from when the Lease was first seen.
func (o *observer) replacedFor(name, holder string, now time.Time) bool {
	ob := o.seen[name]
	if ob.prev.holder != holder {
		return now.Sub(ob.firstSeen) > o.leaseDuration
	}
	p := ob.prev
	return now.Sub(p.lastRenewal) > max(o.leaseDuration, p.lease, p.renew+o.leaseDuration-o.renewDeadline)
}

// lastHolder returns the last non-empty holder seen on the Lease named name.
func (o *observer) lastHolder(name string) string { return o.seen[name].holder }

// unchangedFor reports whether the Lease named name has been seen unchanged,
// or absent, for at least the lease duration. A Lease never seen counts from
// the observer's start.
func (o *observer) unchangedFor(name string, now time.Time) bool {
	return now.Sub(o.changedAt(name)) > o.leaseFor(name)
}

// changedAt returns when the Lease named name was last seen to change; a
// Lease never seen counts from the observer's start.
func (o *observer) changedAt(name string) time.Time {
	if ob, ok := o.seen[name]; ok {
		return ob.changed
	}
	return o.started
}

// changedWithin reports whether the Lease named name was seen to change
// within d before now.
func (o *observer) changedWithin(name string, now time.Time, d time.Duration) bool {
	return now.Sub(o.changedAt(name)) <= d
}

// members returns the live holders (HolderIdentity: one process of a
// replica) from the membership Leases: each Lease's holder, when it is a
// process of the replica the Lease is named after and the Lease changed
// within the lease duration. leaving are live but handing over; cordoned
// live but kept out of the ring by CordonedAnnotation.
func (o *observer) members(leases []coordinationv1.Lease, now time.Time) (live, leaving, cordoned map[string]bool) {
	live, leaving, cordoned = map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i := range leases {
		l := &leases[i]
		changed := o.observe(l, now)
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if holder == "" || MemberLeaseName(HolderName(holder)) != l.Name || now.Sub(changed) > o.leaseFor(l.Name) {
			continue
		}
		live[holder] = true
		if l.Annotations[v1alpha1.LeavingAnnotation] == "true" {
			leaving[holder] = true
		}
		if Cordoned(l) {
			cordoned[holder] = true
		}
	}
	return live, leaving, cordoned
}

// noteTimings logs, once per change, every membership Lease whose holder
// publishes other timings than this replica's: observers then wait for the
// longer lease duration, so take-overs from it are slower than configured.
func (c *Coordinator) noteTimings(members []coordinationv1.Lease) {
	for i := range members {
		l := &members[i]
		lease, renew := published(l)
		if l.Name == MemberLeaseName(c.o.Identity) || lease == 0 || (lease == c.o.LeaseDuration && renew == c.o.RenewDeadline) {
			delete(c.timings, l.Name)
			continue
		}
		key := lease.String() + "/" + renew.String()
		if c.timings[l.Name] == key {
			continue
		}
		c.timings[l.Name] = key
		c.log.Info("A replica runs with other timings; its take-overs wait for the longer lease duration",
			"member", holderOf(l), "leaseDuration", lease, "renewDeadline", renew,
			"ownLeaseDuration", c.o.LeaseDuration, "ownRenewDeadline", c.o.RenewDeadline)
	}
}
