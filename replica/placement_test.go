package replica_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// ownerChanged returns the OwnerChanged events recorded on cluster.
func ownerChanged(t *testing.T, cluster string) []string {
	t.Helper()
	var list corev1.EventList
	if err := env.Client.List(t.Context(), &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Reason == v1alpha1.ReasonOwnerChanged && e.InvolvedObject.Name == cluster {
			out = append(out, e.Message)
		}
	}
	return out
}

// TestPlacementAndVisibleHandOvers: two replicas; a RemoteCluster pinned
// through spec.placement moves to its replica, whose status names the
// placement, the owning process and a raised epoch, with an OwnerChanged
// event saying from whom and why; when the pinned replica shuts down the
// cluster falls back to the other, and status says the pin is not honoured.
func TestPlacementAndVisibleHandOvers(t *testing.T) {
	ctx := t.Context()
	replicas := map[string]*running{"pin-a": startReplica(t, "pin-a"), "pin-b": startReplica(t, "pin-b")}
	remoteCluster(t, "pinned", 0)
	waitReady(t, "pinned", 60*time.Second)
	get := func() v1alpha1.RemoteCluster {
		var rc v1alpha1.RemoteCluster
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "pinned"}, &rc); err != nil {
			t.Fatal(err)
		}
		return rc
	}
	first := get()
	from := first.Status.Owner
	to := "pin-a"
	if from == to {
		to = "pin-b"
	}
	if !strings.HasPrefix(first.Status.OwnerIncarnation, from+"@") || first.Status.OwnershipEpoch == 0 || first.Status.Placement != "" {
		t.Fatalf("status of a freely placed cluster: %+v", first.Status)
	}

	first.Spec.Placement = &v1alpha1.Placement{Replica: to}
	if err := env.Client.Update(ctx, &first); err != nil {
		t.Fatal(err)
	}
	var moved v1alpha1.RemoteCluster
	eventually(t, 30*time.Second, "the pinned cluster on its replica, said in status", func() bool {
		moved = get()
		ready := condition(t, "pinned", v1alpha1.ConditionReady)
		return moved.Status.Owner == to && moved.Status.Placement == "pinned to "+to && ready != nil && ready.Status == "True"
	})
	if !strings.HasPrefix(moved.Status.OwnerIncarnation, to+"@") || moved.Status.OwnershipEpoch <= first.Status.OwnershipEpoch {
		t.Fatalf("status after the move: incarnation %q, epoch %d (before %d)", moved.Status.OwnerIncarnation, moved.Status.OwnershipEpoch, first.Status.OwnershipEpoch)
	}
	eventually(t, 10*time.Second, "an OwnerChanged event for the move", func() bool {
		for _, m := range ownerChanged(t, "pinned") {
			if strings.Contains(m, "from "+from+"@") && strings.Contains(m, "to "+to+"@") && strings.Contains(m, "("+v1alpha1.TransferPin+")") && !strings.Contains(m, "not measured") {
				return true
			}
		}
		return false
	})

	// The pinned replica shuts down: the cluster falls back, status says why.
	replicas[to].stop()
	eventually(t, 30*time.Second, "the cluster back on the other replica, the pin explained", func() bool {
		rc := get()
		return rc.Status.Owner == from && strings.Contains(rc.Status.Placement, "not on the ring")
	})
	eventually(t, 10*time.Second, "an OwnerChanged event for the shutdown", func() bool {
		for _, m := range ownerChanged(t, "pinned") {
			if strings.Contains(m, "from "+to+"@") && strings.Contains(m, "("+v1alpha1.TransferShutdown+")") {
				return true
			}
		}
		return false
	})
}
