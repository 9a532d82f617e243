package main_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/cmd/clustershard/operate"
	"github.com/clustershard/clustershard/cmd/clustershard/status"
)

// TestDrainUncordonMoveProcesses runs two replica processes and the
// operator's commands of the real binary against them: drain hands every
// cluster of a replica over and the cordon outlives its restart; uncordon
// gives it clusters again; move hands one cluster over and pins it, with an
// OwnerChanged event; bad names get clear errors.
func TestDrainUncordonMoveProcesses(t *testing.T) {
	ctx := t.Context()
	bin := build(t)
	kc := managementKubeconfig(t)
	clusters := createClusters(t, "op", 6)
	for _, name := range clusters {
		rc := &v1alpha1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), rc) })
	}
	cli := func(args ...string) (string, error) {
		out, err := exec.Command(bin, append(args, "--kubeconfig", kc, "--namespace", ns)...).CombinedOutput()
		return string(out), err
	}
	procs := map[string]*proc{"o-0": start(t, bin, kc, "o-0"), "o-1": start(t, bin, kc, "o-1")}
	heldBy := func(replica string) []string {
		held, err := operate.Held(ctx, env.Client, ns, replica)
		if err != nil {
			t.Fatal(err)
		}
		return held
	}
	ours := func(replicas ...string) func() bool {
		return func() bool {
			h := holders(t)
			for _, c := range clusters {
				ok := false
				for _, r := range replicas {
					ok = ok || h[c] == r
				}
				if !ok {
					return false
				}
			}
			return true
		}
	}
	poll(t, 60*time.Second, "every cluster held by o-0 or o-1", ours("o-0", "o-1"))
	poll(t, 30*time.Second, "o-0 holding some cluster", func() bool { return len(heldBy("o-0")) > 0 })

	// Drain o-0.
	out, err := cli("drain", "o-0", "--timeout", "60s")
	if err != nil || !strings.Contains(out, "o-0 drained") {
		t.Fatalf("drain: %v\n%s", err, out)
	}
	if held := heldBy("o-0"); len(held) != 0 {
		t.Fatalf("drained o-0 still holds %v", held)
	}
	poll(t, 30*time.Second, "every cluster on o-1", ours("o-1"))
	var rep status.Report
	poll(t, 10*time.Second, "status showing o-0 cordoned, with no warning", func() bool {
		out, err := exec.Command(bin, "status", "--kubeconfig", kc, "--namespace", ns, "-o", "json").Output()
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		rep = status.Report{}
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Replicas {
			if r.Name == "o-0" && r.Cordoned == "" {
				return false
			}
		}
		for _, w := range rep.Warnings {
			if strings.Contains(w.Message, "o-0") || strings.Contains(w.Message, "o-1") || strings.Contains(w.Message, "op-") {
				return false
			}
		}
		return true
	})

	// The cordon outlives a restart of o-0.
	if err := procs["o-0"].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-procs["o-0"].exited
	procs["o-0"] = start(t, bin, kc, "o-0")
	poll(t, 30*time.Second, "o-0 live again", func() bool {
		r, err := status.Collect(ctx, env.Client, ns, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range r.Replicas {
			if x.Name == "o-0" && !x.Expired && x.Incarnation != "" {
				return true
			}
		}
		return false
	})
	// Passes in which a restarted o-0 would take clusters if it were not
	// cordoned: it holds none throughout.
	holdsFor(t, 3*time.Second, "the restarted, cordoned o-0 holding no cluster", func() bool { return len(heldBy("o-0")) == 0 })

	// Uncordon: o-0 takes clusters again.
	if out, err := cli("uncordon", "o-0"); err != nil {
		t.Fatalf("uncordon: %v\n%s", err, out)
	}
	poll(t, 30*time.Second, "o-0 holding clusters again", func() bool { return len(heldBy("o-0")) > 0 })
	poll(t, 30*time.Second, "every cluster held by o-0 or o-1", ours("o-0", "o-1"))
	// The uncordon's rebalance may still be moving clusters (the ring holds
	// those of other tests too): a move of one it is moving would be that
	// rebalance, with no Placement transfer of its own.
	settled(t, 60*time.Second, 3*time.Second)

	// Move one cluster to the replica that does not hold it.
	cluster := clusters[0]
	from := holders(t)[cluster]
	to := "o-0"
	if from == to {
		to = "o-1"
	}
	out, err = cli("move", cluster, "--to", to)
	if err != nil || !strings.Contains(out, "moved to "+to) {
		t.Fatalf("move: %v\n%s", err, out)
	}
	var rc v1alpha1.RemoteCluster
	if err := env.Client.Get(ctx, client.ObjectKey{Name: cluster}, &rc); err != nil || rc.Spec.Placement == nil || rc.Spec.Placement.Replica != to {
		t.Fatalf("after move: %v, placement %+v", err, rc.Spec.Placement)
	}
	poll(t, 30*time.Second, "an OwnerChanged event for the move", func() bool {
		var list corev1.EventList
		_ = env.Client.List(ctx, &list, client.InNamespace("default"))
		for _, e := range list.Items {
			if e.Reason == v1alpha1.ReasonOwnerChanged && e.InvolvedObject.Name == cluster &&
				strings.Contains(e.Message, "from "+from+"@") && strings.Contains(e.Message, "("+v1alpha1.TransferPin+")") {
				return true
			}
		}
		return false
	})

	// Bad names are refused by name; unpin.
	for _, bad := range [][]string{
		{"move", cluster, "--to", "no-such-replica"},
		{"move", "no-such-cluster", "--to", to},
		{"drain", "no-such-replica"},
		{"move", cluster},
	} {
		if out, err := cli(bad...); err == nil || !strings.Contains(out, "no-such") && !strings.Contains(out, "--to") {
			t.Fatalf("%v: %v\n%s", bad, err, out)
		}
	}
	if out, err := cli("move", cluster, "--unpin"); err != nil {
		t.Fatalf("unpin: %v\n%s", err, out)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: cluster}, &rc); err != nil || rc.Spec.Placement != nil && rc.Spec.Placement.Replica != "" {
		t.Fatalf("after unpin: %v, placement %+v", err, rc.Spec.Placement)
	}
}
