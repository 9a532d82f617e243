package status

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/shard"
)

// Cluster is one RemoteCluster's row.
type Cluster struct {
	Name  string `json:"name"`
	Owner string `json:"owner"`
	// Incarnation is the process of Owner named by the Lease.
	Incarnation string `json:"incarnation,omitempty"`
	// NotRunning says why Owner cannot be running the cluster (its
	// membership expired or is held by another process of it); "" when
	// it can.
	NotRunning string `json:"notRunning,omitempty"`
	// StatusOwner is the owner the RemoteCluster's status names: the last
	// owner's word, which a crashed owner cannot correct.
	StatusOwner string `json:"statusOwner,omitempty"`
	// Placement is status.placement: how spec.placement was applied.
	Placement string        `json:"placement,omitempty"`
	LeaseAge  time.Duration `json:"leaseAge"`
	Connected string        `json:"connected"`
	Ready     string        `json:"ready"`
	Objects   int           `json:"objects"`
}

// Replica is one replica's row.
type Replica struct {
	Name          string        `json:"name"`
	Incarnation   string        `json:"incarnation"`
	Owned         int           `json:"owned"`
	MembershipAge time.Duration `json:"membershipAge"`
	Leaving       bool          `json:"leaving"`
	Expired       bool          `json:"expired"`
	// Cordoned is the cordon mark (who and when), "" when not cordoned.
	Cordoned string `json:"cordoned,omitempty"`
	// Ring is the hash of the ring the replica computed last, and Tracked
	// how many cluster Leases it works on, as published with its last
	// renewal; Held counts the cluster Leases naming this process.
	Ring    string `json:"ring,omitempty"`
	Tracked int    `json:"tracked"`
	Held    int    `json:"held"`
}

// Report is the whole view.
type Report struct {
	Time     time.Time `json:"time"`
	Clusters []Cluster `json:"clusters"`
	Replicas []Replica `json:"replicas"`
	Unowned  int       `json:"unowned"`
	// Ring is the hash of the ring these Leases make: the live members
	// neither leaving nor cordoned.
	Ring string `json:"ring"`
	// Warnings are disagreements between what the replicas publish, the
	// Leases and the RemoteClusters' status. One seen during a change (a
	// replica joining, a hand-over) may last a renew period; one that stays
	// is a problem (see Confirm).
	Warnings []Warning `json:"warnings,omitempty"`
}

// Warning is one disagreement; Key names what it is about (the replica or
// cluster and the kind of disagreement), the same in every report.
type Warning struct {
	Key     string `json:"key"`
	Message string `json:"message"`
}

func (r *Report) warn(key, format string, args ...any) {
	r.Warnings = append(r.Warnings, Warning{Key: key, Message: fmt.Sprintf(format, args...)})
}

// Confirm keeps the warnings of r that an earlier report prev had too, by
// Key: disagreements that outlasted the time between the two reports, not
// the passing ones of a change in progress.
func (r *Report) Confirm(prev *Report) {
	seen := map[string]bool{}
	for _, w := range prev.Warnings {
		seen[w.Key] = true
	}
	var kept []Warning
	for _, w := range r.Warnings {
		if seen[w.Key] {
			kept = append(kept, w)
		}
	}
	r.Warnings = kept
}

// Collect reads Leases, RemoteClusters and the replicated kinds' sources. Ages
// and expiry compare Lease times with this machine's clock: fine for a view,
// never used for decisions.
func Collect(ctx context.Context, c client.Reader, namespace string, kinds []remotecopy.Kind) (*Report, error) {
	now := time.Now()
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(namespace), client.HasLabels{v1alpha1.LeaseRoleLabel}); err != nil {
		return nil, fmt.Errorf("list Leases: %w", err)
	}
	var rcs v1alpha1.RemoteClusterList
	if err := c.List(ctx, &rcs); err != nil {
		return nil, fmt.Errorf("list RemoteClusters: %w", err)
	}
	objects := map[string]int{}
	named := map[string][]string{} // cluster: the sources naming it, "Kind ns/name"
	for _, k := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
		if err := c.List(ctx, list); err != nil {
			return nil, fmt.Errorf("list %s: %w", k.GVK.Kind, err)
		}
		for i := range list.Items {
			if cl := k.Cluster(&list.Items[i]); cl != "" {
				objects[cl]++
				named[cl] = append(named[cl], k.GVK.Kind+" "+client.ObjectKeyFromObject(&list.Items[i]).String())
			}
		}
	}
	holders := map[string]*coordinationv1.Lease{}
	r := &Report{Time: now}
	replicas := map[string]*Replica{}
	for i := range leases.Items {
		l := &leases.Items[i]
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		switch l.Labels[v1alpha1.LeaseRoleLabel] {
		case "cluster":
			if c := shard.LeaseCluster(l); c != "" {
				holders[c] = l
			}
		case "member":
			if holder == "" {
				continue
			}
			rep := &Replica{Name: shard.HolderName(holder), Incarnation: holder, Leaving: l.Annotations[v1alpha1.LeavingAnnotation] == "true",
				Cordoned: l.Annotations[v1alpha1.CordonedAnnotation], Ring: l.Labels[v1alpha1.RingLabel]}
			if shard.Cordoned(l) && rep.Cordoned == "" {
				rep.Cordoned = "yes"
			}
			rep.Tracked, _ = strconv.Atoi(l.Labels[v1alpha1.TrackedLabel])
			if l.Spec.AcquireTime != nil {
				rep.MembershipAge = now.Sub(l.Spec.AcquireTime.Time).Round(time.Second)
			}
			if l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil {
				rep.Expired = now.Sub(l.Spec.RenewTime.Time) > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second
			}
			replicas[rep.Name] = rep
		}
	}
	for _, rc := range rcs.Items {
		row := Cluster{Name: rc.Name, Objects: objects[rc.Name], Connected: cond(rc, v1alpha1.ConditionConnected), Ready: cond(rc, v1alpha1.ConditionReady),
			StatusOwner: rc.Status.Owner, Placement: rc.Status.Placement}
		if l := holders[rc.Name]; l != nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			row.Incarnation = shard.LeaseHolder(l)
			row.Owner = shard.HolderName(row.Incarnation)
			if l.Spec.AcquireTime != nil {
				row.LeaseAge = now.Sub(l.Spec.AcquireTime.Time).Round(time.Second)
			}
			rep, ok := replicas[row.Owner]
			if ok && rep.Incarnation == row.Incarnation {
				rep.Held++
			}
			switch {
			case !ok:
				row.NotRunning = "not a member"
			case rep.Expired:
				row.NotRunning = "membership expired"
			case rep.Incarnation != row.Incarnation:
				row.NotRunning = "held by an earlier process (" + row.Incarnation + "; the member is " + rep.Incarnation + ")"
			}
			if row.NotRunning == "" {
				rep.Owned++
			} else {
				r.Unowned++
			}
		} else {
			r.Unowned++
		}
		owner := row.Owner
		if row.NotRunning != "" {
			owner = "" // its holder does not run it
		}
		if row.StatusOwner != owner {
			r.warn("status-owner/"+rc.Name, "%s: status names owner %q, the Leases %q", rc.Name, row.StatusOwner, owner)
		}
		r.Clusters = append(r.Clusters, row)
	}
	missingClusters(r, rcs.Items, named)
	var ring []string
	for _, rep := range replicas {
		if !rep.Expired && !rep.Leaving && rep.Cordoned == "" {
			ring = append(ring, rep.Name)
		}
	}
	r.Ring = shard.RingHash(ring)
	for _, rep := range replicas {
		r.Replicas = append(r.Replicas, *rep)
	}
	slices.SortFunc(r.Replicas, func(a, b Replica) int { return strings.Compare(a.Name, b.Name) })
	for _, rep := range r.Replicas {
		switch {
		case rep.Expired:
			continue
		case rep.Ring != r.Ring:
			r.warn("ring/"+rep.Name, "%s disagrees on the ring: it computed %q, the Leases make %q (%d members: %s)",
				rep.Name, rep.Ring, r.Ring, len(ring), strings.Join(slices.Sorted(slices.Values(ring)), ", "))
		}
		if rep.Tracked != rep.Held {
			r.warn("tracked/"+rep.Name, "%s: %d cluster Leases name it, it tracks %d", rep.Name, rep.Held, rep.Tracked)
		}
	}
	return r, nil
}

func cond(rc v1alpha1.RemoteCluster, typ string) string {
	c := meta.FindStatusCondition(rc.Status.Conditions, typ)
	if c == nil {
		return "Unknown"
	}
	return string(c.Status)
}

// WriteTable prints the report as two tables.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tOWNER\tLEASE AGE\tCONNECTED\tREADY\tOBJECTS\tPLACEMENT")
	for _, c := range r.Clusters {
		owner := c.Owner
		switch {
		case owner == "":
			owner = "<none>"
		case c.NotRunning != "":
			owner += " (not running: " + c.NotRunning + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", c.Name, owner, c.LeaseAge, c.Connected, c.Ready, c.Objects, c.Placement)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "REPLICA\tOWNED\tMEMBERSHIP AGE\tSTATE")
	for _, rep := range r.Replicas {
		state := "member"
		switch {
		case rep.Expired:
			state = "expired"
		case rep.Leaving:
			state = "leaving"
		case rep.Cordoned != "":
			state = "cordoned (" + rep.Cordoned + ")"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", rep.Name, rep.Owned, rep.MembershipAge, state)
	}
	fmt.Fprintf(tw, "\n%d clusters, %d unowned, %d replicas\n", len(r.Clusters), r.Unowned, len(r.Replicas))
	for _, w := range r.Warnings {
		fmt.Fprintf(tw, "WARNING: %s\n", w.Message)
	}
	return tw.Flush()
}

// missingClusters warns of sources that name a RemoteCluster which does not
// exist: no replica works on them, and their RemoteSynced condition says
// ClusterNotFound (with the message only where the kind's schema keeps one).
func missingClusters(r *Report, rcs []v1alpha1.RemoteCluster, named map[string][]string) {
	exists := make(map[string]bool, len(rcs))
	for _, rc := range rcs {
		exists[rc.Name] = true
	}
	for _, cl := range slices.Sorted(maps.Keys(named)) {
		if exists[cl] {
			continue
		}
		srcs := slices.Sorted(slices.Values(named[cl]))
		shown := strings.Join(srcs[:min(len(srcs), 3)], ", ")
		if len(srcs) > 3 {
			shown += fmt.Sprintf(" and %d more", len(srcs)-3)
		}
		r.warn("missing-cluster/"+cl, "%d source(s) name RemoteCluster %q, but no RemoteCluster of that name exists, so nothing copies them (RemoteSynced=False, ClusterNotFound): %s",
			len(srcs), cl, shown)
	}
}
