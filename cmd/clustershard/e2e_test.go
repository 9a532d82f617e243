package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/cmd/clustershard/status"
	"github.com/clustershard/clustershard/shard"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, testenv.Options{Remotes: 2}, &env))
}

const (
	ns            = testenv.ControllerNamespace
	leaseDuration = 4 * time.Second
)

type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	log    string // the file its output goes to
}

func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "clustershard")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func start(t *testing.T, bin, kubeconfig, id string, extra ...string) *proc {
	t.Helper()
	dir := os.Getenv("CLUSTERSHARD_TEST_LOGDIR") // keep replica logs there
	if dir == "" {
		dir = t.TempDir()
	}
	logf, err := os.Create(filepath.Join(dir, id+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--kubeconfig", kubeconfig, "--namespace", ns, "--replica-id", id,
		"--replicate-kind", "ExampleChaos.v1alpha1.example.clustershard.io/examplechaos",
		"--lease-duration", leaseDuration.String(), "--renew-deadline", "3s", "--retry-period", "500ms",
		"--probe-interval", "1s", "--shutdown-timeout", "15s", "--metrics-bind-address", "0")
	if len(extra) == 0 {
		extra = []string{"--health-probe-bind-address", "0"}
	}
	cmd.Args = append(cmd.Args, extra...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{}), log: logf.Name()}
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("%s ownership log (the shard logger's lines):\n%s", id, shardLines(b, 80))
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s log tail:\n%s", id, b)
		}
	})
	return p
}

// shardLines returns the last n lines of a replica log written by the shard
// logger: every ownership decision, which the tail of a busy log loses.
func shardLines(log []byte, n int) string {
	var lines []string
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, `"logger":"shard"`) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

func holders(t *testing.T) map[string]string {
	var list coordinationv1.LeaseList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LeaseRoleLabel: "cluster"}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			out[l.Annotations[v1alpha1.ClusterAnnotation]] = shard.HolderName(*l.Spec.HolderIdentity)
		}
	}
	return out
}

// holdsFor checks cond every 50 ms for d and fails as soon as it does not
// hold: that something does not happen (a cordoned replica taking clusters).
func holdsFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); {
		if !cond() {
			t.Fatalf("%s stopped holding", what)
		}
		select {
		case <-t.Context().Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// settled waits until no cluster Lease has changed holder for quiet: the
// ring's moves after a change of members (an uncordon, a join) are over,
// so what a test does next is not mistaken for one of them (or cut by one).
func settled(t *testing.T, timeout, quiet time.Duration) {
	t.Helper()
	last, since := holders(t), time.Now()
	poll(t, timeout, fmt.Sprintf("no cluster Lease changing holder for %v", quiet), func() bool {
		if now := holders(t); !maps.Equal(now, last) {
			last, since = now, time.Now()
			return false
		}
		return time.Since(since) >= quiet
	})
}

// managementKubeconfig writes the management API server's kubeconfig to a
// file for the replica processes and returns its path.
func managementKubeconfig(t *testing.T) string {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "management.kubeconfig")
	if err := os.WriteFile(kc, env.Management.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}

// createClusters creates n RemoteClusters prefix-00, prefix-01, ... on the
// two remotes in turn, each with its own kubeconfig Secret, and returns
// their names.
func createClusters(t *testing.T, prefix string, n int) []string {
	t.Helper()
	var clusters []string
	for i := range n {
		name := fmt.Sprintf("%s-%02d", prefix, i)
		clusters = append(clusters, name)
		if err := localcluster.WriteKubeConfigSecret(t.Context(), env.Client, ns, name, "kubeconfig", env.Remotes[i%2].KubeConfig); err != nil {
			t.Fatal(err)
		}
		rc := &v1alpha1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.RemoteClusterSpec{
			KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyReference{Namespace: ns, Name: name, Key: "kubeconfig"}},
		}}
		if err := env.Client.Create(t.Context(), rc); err != nil {
			t.Fatal(err)
		}
	}
	return clusters
}

func TestReplicaProcesses(t *testing.T) {
	ctx := t.Context()
	bin := build(t)
	kc := managementKubeconfig(t)
	clusters := createClusters(t, "proc", 12)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "procs"}}); err != nil {
		t.Fatal(err)
	}
	procs, metricsAddrs := map[string]*proc{}, map[string]string{}
	for i := range 2 {
		id := "p-" + strconv.Itoa(i)
		metricsAddrs[id] = freeAddr(t)
		procs[id] = start(t, bin, kc, id, "--health-probe-bind-address", "0", "--metrics-bind-address", metricsAddrs[id])
	}
	probes := freeAddr(t)
	metricsAddrs["p-2"] = freeAddr(t)
	procs["p-2"] = start(t, bin, kc, "p-2", "--health-probe-bind-address", probes, "--metrics-bind-address", metricsAddrs["p-2"])
	// members counts the replicas that hold a live membership; every cluster
	// owned and Ready only counts once all of them have joined, or a late
	// joiner's hand-overs would still be under way.
	allReady := func(members int) func() bool {
		return func() bool {
			r, err := status.Collect(ctx, env.Client, ns, nil)
			if err != nil || r.Unowned != 0 || len(r.Clusters) != len(clusters) {
				return false
			}
			live := 0
			for _, rep := range r.Replicas {
				if !rep.Expired && !rep.Leaving {
					live++
				}
			}
			if live != members {
				return false
			}
			for _, c := range r.Clusters {
				if c.Ready != "True" {
					return false
				}
			}
			return true
		}
	}
	poll(t, 90*time.Second, "every cluster owned and Ready with three members", allReady(3))
	for _, path := range []string{"/healthz", "/readyz"} {
		poll(t, 10*time.Second, path, func() bool {
			resp, err := http.Get("http://" + probes + path)
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}

	// Every metric the dashboard and the alert rules use is exported.
	checkMonitoringMetrics(t, metricsAddrs)

	// `clustershard status -o json` shows an owner for every cluster and the
	// three replicas. A hand-over that the ring still makes after the check
	// above leaves a cluster without a holder for a moment; status must show
	// that as <none>, so it is polled rather than read once.
	var rep status.Report
	poll(t, 15*time.Second, "`clustershard status` with an owner for every cluster", func() bool {
		out, err := exec.Command(bin, "status", "--kubeconfig", kc, "--namespace", ns, "-o", "json").Output()
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		rep = status.Report{}
		if err := json.NewDecoder(bytes.NewReader(out)).Decode(&rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Clusters) != len(clusters) || len(rep.Replicas) != 3 {
			return false
		}
		for _, c := range rep.Clusters {
			if c.Owner == "" {
				return false
			}
		}
		return true
	})

	// SIGTERM: graceful hand-over.
	moved := func(from string) []string {
		var out []string
		for c, h := range holders(t) {
			if h == from {
				out = append(out, c)
			}
		}
		return out
	}
	termed := moved("p-0")
	sent := time.Now()
	if err := procs["p-0"].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	poll(t, 2*time.Second, "SIGTERM hand-over of p-0's clusters", func() bool {
		h := holders(t)
		for _, c := range termed {
			if h[c] == "" || h[c] == "p-0" {
				return false
			}
		}
		return true
	})
	t.Logf("SIGTERM: %d clusters handed over in %v", len(termed), time.Since(sent).Round(10*time.Millisecond))
	select {
	case <-procs["p-0"].exited:
	case <-time.After(20 * time.Second):
		t.Fatal("p-0 did not exit after SIGTERM")
	}

	// SIGKILL: taken over after the lease duration.
	// The baseline is taken once p-2 has settled after the SIGTERM hand-over:
	// it runs a manager for every Lease it holds, and two scrapes in a row
	// (more than a retry period apart) show the same acquisitions and
	// hand-over observations. A Lease write committed but not yet counted, or
	// a manager running but not yet observed, would otherwise fall after the
	// baseline and count as part of the take-over.
	var before, prev map[string]*dto.MetricFamily
	settled := func(a, b map[string]*dto.MetricFamily) bool {
		for _, n := range []string{"clustershard_cluster_lease_transitions_total", "clustershard_handover_duration_seconds", "clustershard_cluster_unmanaged_duration_seconds"} {
			if value(a, n, nil) != value(b, n, nil) {
				return false
			}
		}
		return true
	}
	poll(t, 30*time.Second, "p-2 settled, a running manager for every cluster it holds, before the kill", func() bool {
		time.Sleep(time.Second)
		prev, before = before, scrape(t, metricsAddrs["p-2"])
		held := 0
		for _, h := range holders(t) {
			if h == "p-2" {
				held++
			}
		}
		owned := value(before, "clustershard_owned_clusters", nil)
		return prev != nil && settled(prev, before) && owned == float64(held) &&
			owned == value(before, "clustershard_remote_managers", map[string]string{"state": "Running"})
	})
	killed := moved("p-1")
	sent = time.Now()
	if err := procs["p-1"].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	maxUnowned := 0.0
	poll(t, leaseDuration+5*time.Second, "take-over of p-1's clusters", func() bool {
		maxUnowned = max(maxUnowned, value(scrape(t, metricsAddrs["p-2"]), "clustershard_unowned_clusters", nil))
		h := holders(t)
		for _, c := range killed {
			if h[c] != "p-2" {
				return false
			}
		}
		return true
	})
	t.Logf("SIGKILL: %d clusters taken over in %v (lease %v)", len(killed), time.Since(sent).Round(10*time.Millisecond), leaseDuration)
	checkTakeOverMetrics(t, metricsAddrs["p-2"], before, len(killed), len(clusters), maxUnowned)

	// Objects keep syncing on the survivor.
	poll(t, 60*time.Second, "every cluster Ready on p-2", allReady(1))
	for i, c := range clusters {
		obj := &examplev1alpha1.ExampleChaos{ObjectMeta: metav1.ObjectMeta{Namespace: "procs", Name: c}, Spec: examplev1alpha1.ExampleChaosSpec{RemoteCluster: c}}
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		poll(t, 30*time.Second, "copy of "+c, func() bool {
			return env.RemoteClients[i%2].Get(ctx, client.ObjectKeyFromObject(obj), &examplev1alpha1.ExampleChaos{}) == nil
		})
		// One object per remote suffices to show both remotes sync.
		if i == 1 {
			break
		}
	}
	poll(t, 10*time.Second, "two Synced objects in p-2's metrics", func() bool {
		return value(scrape(t, metricsAddrs["p-2"]), "clustershard_replicated_objects", map[string]string{"state": "Synced"}) == 2
	})
}

// freeAddr returns a free loopback address for a replica to bind. It is
// chosen below Linux's ephemeral port range (32768–60999): a port from that
// range can be taken, between this check and the replica's bind, by any
// outgoing connection or ":0" listener of the packages tested alongside
// (seen once in CI: the replica could not bind, died, and its /healthz never
// answered).
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 200 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000)))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		_ = l.Close()
		return addr
	}
	t.Fatal("no free loopback port in 20000-31999")
	return ""
}
