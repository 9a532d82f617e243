package shard

import (
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// observer judges liveness by locally observed time, as client-go's
// leaderelection does: a Lease is live while it has changed (new
// resourceVersion) within the last LeaseDuration of this replica's monotonic
// clock. A remote renewTime is never compared with the local clock.
type observer struct {
	leaseDuration time.Duration
	started       time.Time
	seen          map[string]observation // by Lease name
}

type observation struct {
	resourceVersion string    // "" while the Lease is absent
	changed         time.Time // local time the current version (or absence) was first seen
	holder          string    // the last non-empty holder seen, across versions
}

func newObserver(leaseDuration time.Duration) *observer {
	return &observer{leaseDuration: leaseDuration, started: time.Now(), seen: map[string]observation{}}
}

// observe records the current version of a Lease and returns when it last changed.
func (o *observer) observe(l *coordinationv1.Lease, now time.Time) time.Time {
	ob, ok := o.seen[l.Name]
	if !ok || ob.resourceVersion != l.ResourceVersion {
		ob = observation{resourceVersion: l.ResourceVersion, changed: now, holder: ob.holder}
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			ob.holder = *l.Spec.HolderIdentity
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

// lastHolder returns the last non-empty holder seen on the Lease named name.
func (o *observer) lastHolder(name string) string { return o.seen[name].holder }

// unchangedFor reports whether the Lease named name has been seen unchanged,
// or absent, for at least the lease duration. A Lease never seen counts from
// the observer's start.
func (o *observer) unchangedFor(name string, now time.Time) bool {
	return now.Sub(o.changedAt(name)) > o.leaseDuration
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
// within the lease duration. leaving are live but handing over.
func (o *observer) members(leases []coordinationv1.Lease, now time.Time) (live map[string]bool, leaving map[string]bool) {
	live, leaving = map[string]bool{}, map[string]bool{}
	for i := range leases {
		l := &leases[i]
		changed := o.observe(l, now)
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if holder == "" || MemberLeaseName(HolderName(holder)) != l.Name || now.Sub(changed) > o.leaseDuration {
			continue
		}
		live[holder] = true
		if l.Annotations[LeavingAnnotation] == "true" {
			leaving[holder] = true
		}
	}
	return live, leaving
}
