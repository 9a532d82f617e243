package replica_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotefence"
	"github.com/clustershard/clustershard/replica"
)

// A manager whose ownership epoch was superseded in the remote cluster
// (raised here by hand; in life by a second management cluster using the
// same name, or by an owner this replica did not know of) has every write
// refused by the remote API server. The replica notices, restarts the
// manager under a new epoch with a Warning event, and copies sync again.
func TestSupersededEpochRestartsTheManager(t *testing.T) {
	ctx := t.Context()
	startReplicaWith(t, "fence-owner", func(o *replica.Options) { o.Resync = time.Second })
	remoteCluster(t, "superseded", 0, "superseded-ns")
	waitReady(t, "superseded", 60*time.Second)
	if c := condition(t, "superseded", v1alpha1.ConditionRemoteFenced); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("RemoteFenced: %+v", c)
	}
	byHand, err := remotefence.Raise(ctx, env.Remotes[0].Config, remotefence.Options{Cluster: "superseded"})
	if err != nil || !byHand.Enforced {
		t.Fatalf("raise by hand: %+v %v", byHand, err)
	}
	ensureNamespace(t, env.Client, "superseded-ns")
	if err := env.Client.Create(ctx, source("superseded-ns", "after", "superseded")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the copy made after the epoch was superseded", func() bool {
		_, err := copyOf(t, 0, "superseded-ns", "after")
		return err == nil
	})
	cur, ok, err := remotefence.Current(ctx, env.Remotes[0].Config, "superseded")
	if err != nil || !ok || cur <= byHand.Value {
		t.Fatalf("the replica did not raise a new epoch: remote holds %d (by hand %d), %v", cur, byHand.Value, err)
	}
	t.Logf("epoch raised by hand %d, then by the restarted manager %d", byHand.Value, cur)
}
