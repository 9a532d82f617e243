package main_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/cmd/clustershard/status"
)

// TestNoOwnerAfterLastShutdownAndCrash runs two replica processes, stops
// both gracefully and checks that the last one marked every cluster
// Ready=Unknown NoOwner with no owner in status; a restarted replica takes
// them back; once it is killed with SIGKILL, clustershard status shows them
// unowned after the lease duration and flags the status that still names it.
func TestNoOwnerAfterLastShutdownAndCrash(t *testing.T) {
	ctx := t.Context()
	bin := build(t)
	kc := managementKubeconfig(t)
	clusters := createClusters(t, "no", 4)
	get := func(name string) v1alpha1.RemoteCluster {
		var rc v1alpha1.RemoteCluster
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &rc); err != nil {
			t.Fatal(err)
		}
		return rc
	}
	every := func(cond func(v1alpha1.RemoteCluster) bool) func() bool {
		return func() bool {
			for _, c := range clusters {
				if !cond(get(c)) {
					return false
				}
			}
			return true
		}
	}
	ready := func(rc v1alpha1.RemoteCluster) bool {
		return meta.IsStatusConditionTrue(rc.Status.Conditions, v1alpha1.ConditionReady) && rc.Status.Owner != ""
	}
	procs := map[string]*proc{"n-0": start(t, bin, kc, "n-0"), "n-1": start(t, bin, kc, "n-1")}
	poll(t, 60*time.Second, "every cluster owned and Ready", every(ready))

	// Both stop gracefully, one after the other: n-1 takes n-0's clusters,
	// then stops with no successor.
	for _, id := range []string{"n-0", "n-1"} {
		if err := procs[id].cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-procs[id].exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not exit after SIGTERM", id)
		}
		if id == "n-0" {
			poll(t, 30*time.Second, "every cluster Ready on n-1", every(func(rc v1alpha1.RemoteCluster) bool { return ready(rc) && rc.Status.Owner == "n-1" }))
		}
	}
	for _, c := range clusters {
		rc := get(c)
		cond := meta.FindStatusCondition(rc.Status.Conditions, v1alpha1.ConditionReady)
		if rc.Status.Owner != "" || rc.Status.OwnerIncarnation != "" || cond == nil || cond.Status != metav1.ConditionUnknown || cond.Reason != v1alpha1.ReasonNoOwner {
			t.Fatalf("%s after the last replica stopped: owner %q, Ready %+v", c, rc.Status.Owner, cond)
		}
	}
	rep, err := status.Collect(ctx, env.Client, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rep.Clusters {
		for _, c := range clusters {
			if row.Name == c && (row.Owner != "" || row.StatusOwner != "") {
				t.Fatalf("clustershard status after the last shutdown: %+v", row)
			}
		}
	}

	// A replica starts again and takes them back; then it is killed.
	procs["n-0"] = start(t, bin, kc, "n-0")
	poll(t, 60*time.Second, "every cluster Ready again on the restarted replica", every(ready))
	if err := procs["n-0"].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-procs["n-0"].exited
	killed := time.Now()
	poll(t, 2*leaseDuration+10*time.Second, "clustershard status showing the clusters unowned, and their status flagged", func() bool {
		rep, err := status.Collect(context.Background(), env.Client, ns, nil)
		if err != nil {
			t.Fatal(err)
		}
		flagged := map[string]bool{}
		for _, w := range rep.Warnings {
			flagged[w.Key] = true
		}
		for _, row := range rep.Clusters {
			for _, c := range clusters {
				if row.Name == c && (row.NotRunning == "" || row.StatusOwner != "n-0" || !flagged["status-owner/"+c]) {
					return false
				}
			}
		}
		return true
	})
	if since := time.Since(killed); since < leaseDuration-time.Second {
		t.Fatalf("unowned %v after the kill, before the lease duration %v", since, leaseDuration)
	}
}
