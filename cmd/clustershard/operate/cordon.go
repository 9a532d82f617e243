package operate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/shard"
)

// ErrUnknownReplica is returned for a replica that has no membership Lease:
// it never ran in this namespace (or its Lease was deleted).
var ErrUnknownReplica = errors.New("unknown replica")

// memberLease reads a replica's membership Lease.
func memberLease(ctx context.Context, c client.Reader, namespace, replica string) (*coordinationv1.Lease, error) {
	var l coordinationv1.Lease
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: shard.MemberLeaseName(replica)}, &l)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w %q: no membership Lease %s/%s (is the name its --replica-id, and --namespace the replicas' namespace?)",
			ErrUnknownReplica, replica, namespace, shard.MemberLeaseName(replica))
	}
	if err != nil {
		return nil, fmt.Errorf("read the membership Lease of %q: %w", replica, err)
	}
	return &l, nil
}

// Cordon keeps replica out of the ring until Uncordon: it stays a member,
// hands its clusters over by the normal ordered hand-over and takes none.
// The mark is an annotation on its membership Lease (value: by and when),
// which outlives restarts of the replica. Cordoning a cordoned replica
// changes nothing.
func Cordon(ctx context.Context, c client.Client, namespace, replica, by string) error {
	l, err := memberLease(ctx, c, namespace, replica)
	if err != nil {
		return err
	}
	if shard.Cordoned(l) {
		return nil
	}
	return annotate(ctx, c, l, by+" at "+time.Now().UTC().Format(time.RFC3339))
}

// Uncordon puts replica back on the ring.
func Uncordon(ctx context.Context, c client.Client, namespace, replica string) error {
	l, err := memberLease(ctx, c, namespace, replica)
	if err != nil {
		return err
	}
	if !shard.Cordoned(l) {
		return nil
	}
	return annotate(ctx, c, l, nil)
}

// annotate sets (a string) or removes (nil) the cordon annotation with a
// merge patch: the replica's elector keeps renewing the Lease meanwhile.
func annotate(ctx context.Context, c client.Client, l *coordinationv1.Lease, value any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1alpha1.CordonedAnnotation: value}}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, l, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("patch the membership Lease %s: %w", l.Name, err)
	}
	return nil
}

// Held returns the clusters whose Lease names replica (any process of it).
func Held(ctx context.Context, c client.Reader, namespace, replica string) ([]string, error) {
	var list coordinationv1.LeaseList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{v1alpha1.LeaseRoleLabel: "cluster"}); err != nil {
		return nil, fmt.Errorf("list cluster Leases: %w", err)
	}
	var held []string
	for i := range list.Items {
		l := &list.Items[i]
		if h := shard.LeaseHolder(l); h != "" && shard.HolderName(h) == replica {
			held = append(held, shard.LeaseCluster(l))
		}
	}
	return held, nil
}

// Drain cordons replica and waits until it holds no cluster Lease, calling
// progress with the clusters it still holds after each poll. It returns an
// error when ctx ends first; the replica stays cordoned either way.
func Drain(ctx context.Context, c client.Client, namespace, replica, by string, interval time.Duration, progress func(held []string)) error {
	if err := Cordon(ctx, c, namespace, replica, by); err != nil {
		return err
	}
	for {
		held, err := Held(ctx, c, namespace, replica)
		if err != nil {
			return err
		}
		if progress != nil {
			progress(held)
		}
		if len(held) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still holds %d clusters (%v); it stays cordoned and keeps handing them over: %w", replica, len(held), held, ctx.Err())
		case <-time.After(interval):
		}
	}
}
