package status

import (
	"context"
	"fmt"
	"io"
	"slices"
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
	NotRunning string        `json:"notRunning,omitempty"`
	LeaseAge   time.Duration `json:"leaseAge"`
	Connected  string        `json:"connected"`
	Ready      string        `json:"ready"`
	Objects    int           `json:"objects"`
}

// Replica is one replica's row.
type Replica struct {
	Name          string        `json:"name"`
	Incarnation   string        `json:"incarnation"`
	Owned         int           `json:"owned"`
	MembershipAge time.Duration `json:"membershipAge"`
	Leaving       bool          `json:"leaving"`
	Expired       bool          `json:"expired"`
}

// Report is the whole view.
type Report struct {
	Time     time.Time `json:"time"`
	Clusters []Cluster `json:"clusters"`
	Replicas []Replica `json:"replicas"`
	Unowned  int       `json:"unowned"`
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
	for _, k := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
		if err := c.List(ctx, list); err != nil {
			return nil, fmt.Errorf("list %s: %w", k.GVK.Kind, err)
		}
		for i := range list.Items {
			if cl := k.Cluster(&list.Items[i]); cl != "" {
				objects[cl]++
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
			rep := &Replica{Name: shard.HolderName(holder), Incarnation: holder, Leaving: l.Annotations[v1alpha1.LeavingAnnotation] == "true"}
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
		row := Cluster{Name: rc.Name, Objects: objects[rc.Name], Connected: cond(rc, v1alpha1.ConditionConnected), Ready: cond(rc, v1alpha1.ConditionReady)}
		if l := holders[rc.Name]; l != nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			row.Incarnation = shard.LeaseHolder(l)
			row.Owner = shard.HolderName(row.Incarnation)
			if l.Spec.AcquireTime != nil {
				row.LeaseAge = now.Sub(l.Spec.AcquireTime.Time).Round(time.Second)
			}
			rep, ok := replicas[row.Owner]
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
		r.Clusters = append(r.Clusters, row)
	}
	for _, rep := range replicas {
		r.Replicas = append(r.Replicas, *rep)
	}
	slices.SortFunc(r.Replicas, func(a, b Replica) int { return strings.Compare(a.Name, b.Name) })
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
	fmt.Fprintln(tw, "CLUSTER\tOWNER\tLEASE AGE\tCONNECTED\tREADY\tOBJECTS")
	for _, c := range r.Clusters {
		owner := c.Owner
		switch {
		case owner == "":
			owner = "<none>"
		case c.NotRunning != "":
			owner += " (not running: " + c.NotRunning + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", c.Name, owner, c.LeaseAge, c.Connected, c.Ready, c.Objects)
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
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", rep.Name, rep.Owned, rep.MembershipAge, state)
	}
	fmt.Fprintf(tw, "\n%d clusters, %d unowned, %d replicas\n", len(r.Clusters), r.Unowned, len(r.Replicas))
	return tw.Flush()
}
