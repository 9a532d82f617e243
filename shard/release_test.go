package shard_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// failFirstRelease makes the first write that releases a cluster Lease (its
// holder cleared) fail, as a write cut off by a network blip would.
func failFirstRelease(failed *atomic.Bool) func(client.WithWatch) client.WithWatch {
	return func(c client.WithWatch) client.WithWatch {
		return interceptor.NewClient(c, interceptor.Funcs{
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if l, ok := obj.(*coordinationv1.Lease); ok && l.Labels[v1alpha1.LeaseRoleLabel] == "cluster" &&
					(l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "") && failed.CompareAndSwap(false, true) {
					return errors.New("injected: the release of a cluster Lease failed")
				}
				return c.Update(ctx, obj, opts...)
			},
		})
	}
}

// A hand-over whose release write fails leaves a Lease naming a live replica
// that no longer runs the cluster. It must be released again (every pass
// releases Leases that name this replica but that it does not run), so the
// new owner takes the cluster within a lease duration and a few seconds,
// and never two run it at once.
func TestFailedReleaseIsRetried(t *testing.T) {
	ns := namespace(t, "release-fails")
	clusters := names(12)
	tr := newTracker()
	var failed atomic.Bool
	in := map[string]*instance{}
	in["a"] = startInstanceWith(t, ns, "a", clusters, trackingHandler{"a", tr}, failFirstRelease(&failed), nil)
	settled(t, tr, ns, expected(t, []string{"a"}, clusters), in, 30*time.Second)
	in["b"] = startInstance(t, ns, "b", clusters, trackingHandler{"b", tr})
	settled(t, tr, ns, expected(t, []string{"a", "b"}, clusters), in, leaseDuration+5*time.Second)
	if !failed.Load() {
		t.Fatal("no release was failed: the test did not stage its fault")
	}
}
