package operate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/shard"
)

// ErrUnknownCluster is returned for a RemoteCluster that does not exist.
var ErrUnknownCluster = errors.New("unknown RemoteCluster")

// Move pins cluster to replica (spec.placement.replica), so that the ring
// hands it over there by the normal ordered hand-over, and keeps it there
// until Unpin. The replica must be a live member that is not cordoned: a
// pin to any other replica would not move the cluster (the ring places it as
// if unpinned until the replica is back).
func Move(ctx context.Context, c client.Client, namespace, cluster, replica string) error {
	if err := getCluster(ctx, c, cluster); err != nil {
		return err
	}
	l, err := memberLease(ctx, c, namespace, replica)
	if err != nil {
		return err
	}
	switch {
	case shard.LeaseHolder(l) == "":
		return fmt.Errorf("replica %q is not running (its membership Lease has no holder)", replica)
	case shard.Cordoned(l):
		return fmt.Errorf("replica %q is cordoned (clustershard uncordon %s first)", replica, replica)
	case l.Annotations[v1alpha1.LeavingAnnotation] == "true":
		return fmt.Errorf("replica %q is shutting down", replica)
	}
	return pin(ctx, c, cluster, replica)
}

// Unpin removes the pin of cluster: the ring places it again.
func Unpin(ctx context.Context, c client.Client, cluster string) error {
	if err := getCluster(ctx, c, cluster); err != nil {
		return err
	}
	return pin(ctx, c, cluster, nil)
}

func getCluster(ctx context.Context, c client.Reader, cluster string) error {
	var rc v1alpha1.RemoteCluster
	err := c.Get(ctx, types.NamespacedName{Name: cluster}, &rc)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w %q", ErrUnknownCluster, cluster)
	}
	if err != nil {
		return fmt.Errorf("read RemoteCluster %q: %w", cluster, err)
	}
	return nil
}

func pin(ctx context.Context, c client.Client, cluster string, replica any) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"placement": map[string]any{"replica": replica}}})
	if err != nil {
		return err
	}
	rc := &v1alpha1.RemoteCluster{}
	rc.Name = cluster
	if err := c.Patch(ctx, rc, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("patch the placement of RemoteCluster %q: %w", cluster, err)
	}
	return nil
}

// WaitHeld waits until cluster's Lease names replica, polling every
// interval.
func WaitHeld(ctx context.Context, c client.Reader, namespace, cluster, replica string, interval time.Duration) error {
	for {
		held, err := Held(ctx, c, namespace, replica)
		if err != nil {
			return err
		}
		for _, h := range held {
			if h == cluster {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s is not held by %s yet: %w", cluster, replica, ctx.Err())
		case <-time.After(interval):
		}
	}
}
