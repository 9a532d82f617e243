package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/shard"
	"github.com/clustershard/clustershard/test/admissionhook"
	"github.com/clustershard/clustershard/test/localcluster"
)

// slowHook is a validating webhook of remote 0 that holds the creation of
// the slowhook chart's post-install hook in each armed namespace until the
// test lets it go: the Helm install of that namespace is then on its way
// for as long as the test wants.
type slowHook struct {
	srv *admissionhook.Server

	mu      sync.Mutex
	arrived map[string]chan struct{} // closed when the held create arrived
	release map[string]chan struct{} // closed by the test: the create goes on
}

// newSlowHook registers the webhook for namespaces (created in remote 0)
// and waits until the remote API server calls it.
func newSlowHook(t *testing.T, namespaces ...string) *slowHook {
	t.Helper()
	h := &slowHook{arrived: map[string]chan struct{}{}, release: map[string]chan struct{}{}}
	srv, err := admissionhook.New(h.review)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	t.Cleanup(srv.Down)
	remote := env.RemoteClients[0]
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "test-slow-hook"}}
	for _, n := range namespaces {
		if err := remote.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
		cfg.Webhooks = append(cfg.Webhooks, srv.Webhook("slow-"+n+".test.clustershard.io", n, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}, 30*time.Second))
	}
	if err := remote.Create(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remote.Delete(context.Background(), cfg) })
	for _, n := range namespaces {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "webhook-probe"}}
		calls := srv.Calls()
		poll(t, 30*time.Second, "the remote API server calling the webhook for "+n, func() bool {
			_ = remote.Create(t.Context(), probe.DeepCopy(), client.DryRunAll)
			return srv.Calls() > calls
		})
	}
	return h
}

// arm makes the next creation of the hook in ns wait for let(ns); it
// returns a channel closed when that creation arrived.
func (h *slowHook) arm(ns string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.arrived[ns], h.release[ns] = make(chan struct{}), make(chan struct{})
	return h.arrived[ns]
}

// let lets the held creation in ns go on; later ones are not held.
func (h *slowHook) let(ns string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.release[ns]; c != nil {
		close(c)
		delete(h.release, ns)
	}
}

func (h *slowHook) review(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if (req.DryRun != nil && *req.DryRun) || req.Name != "slow-hook" {
		return nil
	}
	h.mu.Lock()
	arrived, release := h.arrived[req.Namespace], h.release[req.Namespace]
	if arrived != nil {
		close(arrived)
		delete(h.arrived, req.Namespace)
	}
	h.mu.Unlock()
	if release == nil {
		return nil
	}
	select {
	case <-release:
	case <-ctx.Done():
	case <-time.After(25 * time.Second):
	}
	return nil
}

// slowCluster creates RemoteCluster name on remote 0 installing the slowhook
// chart as release "slow" in ns.
func slowCluster(t *testing.T, name, ns string) {
	t.Helper()
	chart, err := filepath.Abs(filepath.Join("testdata", "charts", "slowhook"))
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.WriteKubeConfigSecret(t.Context(), env.Client, ns0, name, "kubeconfig", env.Remotes[0].KubeConfig); err != nil {
		t.Fatal(err)
	}
	no := false
	rc := &v1alpha1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.RemoteClusterSpec{
		KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyReference{Namespace: ns0, Name: name, Key: "kubeconfig"}},
		Install: &v1alpha1.InstallSpec{CRDs: &no, CleanupPolicy: v1alpha1.CleanupRetain,
			Helm: &v1alpha1.HelmInstall{Chart: chart, ReleaseName: "slow", Namespace: ns}},
	}}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
}

// ns0 is the controller namespace (ns is taken by the release namespaces here).
const ns0 = ns

// releaseHistory reads the release records of "slow" in ns of remote 0 as
// "[1:deployed]", oldest first.
func releaseHistory(t *testing.T, namespace string) string {
	t.Helper()
	var records corev1.SecretList
	if err := env.RemoteClients[0].List(t.Context(), &records, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm", "name": "slow"}); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(records.Items, func(a, b corev1.Secret) int {
		x, _ := strconv.Atoi(a.Labels["version"])
		y, _ := strconv.Atoi(b.Labels["version"])
		return x - y
	})
	var revs []string
	for _, s := range records.Items {
		revs = append(revs, s.Labels["version"]+":"+s.Labels["status"])
	}
	return "[" + strings.Join(revs, " ") + "]"
}

// clusterEvents returns the reasons and messages of the Events on cluster.
func clusterEvents(t *testing.T, cluster string) []string {
	t.Helper()
	var list corev1.EventList
	if err := env.Client.List(t.Context(), &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == cluster {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// installedOn waits until cluster is Ready and Installed on replica owner
// and returns its Installed condition.
func installedOn(t *testing.T, cluster, owner string) *metav1.Condition {
	t.Helper()
	var installed *metav1.Condition
	poll(t, 60*time.Second, cluster+" Ready and Installed on "+owner, func() bool {
		var rc v1alpha1.RemoteCluster
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: cluster}, &rc); err != nil {
			t.Fatal(err)
		}
		installed = meta.FindStatusCondition(rc.Status.Conditions, v1alpha1.ConditionInstalled)
		return rc.Status.Owner == owner && meta.IsStatusConditionTrue(rc.Status.Conditions, v1alpha1.ConditionReady) &&
			installed != nil && installed.Status == metav1.ConditionTrue
	})
	return installed
}

// inFlight starts replicas ids, creates the slow cluster named ns whose
// install its release namespace ns holds, and returns the replicas and the
// one that owns the cluster once its install is on its way.
func inFlight(t *testing.T, hook *slowHook, bin, kc string, ids []string, ns string) (map[string]*proc, string) {
	t.Helper()
	procs := map[string]*proc{}
	for _, id := range ids {
		procs[id] = start(t, bin, kc, id)
	}
	arrived := hook.arm(ns)
	slowCluster(t, ns, ns)
	<-arrived
	from := holders(t)[ns]
	if !slices.Contains(ids, from) {
		t.Fatalf("%s held by %q, want one of %v", ns, from, ids)
	}
	return procs, from
}

// draining waits until replica p's log says it is letting the work under
// way on cluster finish before it hands the cluster over.
func draining(t *testing.T, p *proc, cluster string) {
	t.Helper()
	poll(t, 30*time.Second, "the old owner draining "+cluster, func() bool {
		b, err := os.ReadFile(p.log)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "Letting the work under way finish") && strings.Contains(l, `"cluster":"`+cluster+`"`) {
				return true
			}
		}
		return false
	})
}

// TestHelmInstallInFlightAtHandOver cuts a Helm install that is on its way
// (its post-install hook held by a remote webhook) by each kind of
// hand-over, with real replica processes: a SIGTERM, a scale-out and a
// cordon let it finish in the old owner (a drained hand-over): the history
// is [1:deployed] and the new owner finds nothing to recover. A SIGKILL
// leaves it pending-install; the successor removes that revision and
// installs again at revision 1, and its Installed condition and a
// HelmRecovered event say so. A hook held past the fence's bound of one
// write (the server gives up on it), alone or with a membership lapse
// (SIGSTOP past the lease duration), interrupts the install: its revision
// stays pending, Installed says HelmInterrupted, and the next try redoes it
// at revision 1. No case leaves a failed revision.
func TestHelmInstallInFlightAtHandOver(t *testing.T) {
	bin := build(t)
	kc := managementKubeconfig(t)
	namespaces := []string{"slow-term", "slow-scale", "slow-cordon", "slow-kill", "slow-bound", "slow-lapse"}
	hook := newSlowHook(t, namespaces...)
	other := func(pair []string, one string) string {
		if pair[0] == one {
			return pair[1]
		}
		return pair[0]
	}
	stopAll := func(t *testing.T, procs map[string]*proc) {
		for _, p := range procs {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
		for id, p := range procs {
			select {
			case <-p.exited:
			case <-time.After(40 * time.Second):
				t.Fatalf("%s did not exit after SIGTERM", id)
			}
		}
	}
	// planned checks a hand-over that had time to let the install finish.
	planned := func(t *testing.T, cluster, ns, successor string) {
		t.Helper()
		installed := installedOn(t, cluster, successor)
		if got := releaseHistory(t, ns); got != "[1:deployed]" {
			t.Fatalf("%s: Helm history %s after the hand-over, want [1:deployed]", cluster, got)
		}
		if strings.Contains(installed.Message, "found ") {
			t.Fatalf("%s: the successor had to recover the release (the hand-over cut the install): %s", cluster, installed.Message)
		}
		for _, e := range clusterEvents(t, cluster) {
			if strings.HasPrefix(e, v1alpha1.ReasonHelmRecovered) || strings.HasPrefix(e, "InstallFailed") {
				t.Fatalf("%s: event %q after a planned hand-over", cluster, e)
			}
		}
		t.Logf("%s: history %s; Installed: %s", cluster, releaseHistory(t, ns), installed.Message)
	}

	t.Run("SIGTERM", func(t *testing.T) {
		ids := []string{"ht-0", "ht-1"}
		procs, from := inFlight(t, hook, bin, kc, ids, "slow-term")
		defer stopAll(t, procs)
		if err := procs[from].cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		draining(t, procs[from], "slow-term")
		hook.let("slow-term")
		<-procs[from].exited
		delete(procs, from)
		planned(t, "slow-term", "slow-term", other(ids, from))
	})

	t.Run("ScaleOut", func(t *testing.T) {
		var list v1alpha1.RemoteClusterList
		if err := env.Client.List(t.Context(), &list); err != nil {
			t.Fatal(err)
		}
		names := []string{"slow-scale"}
		for _, rc := range list.Items {
			names = append(names, rc.Name)
		}
		// Two replica names whose ring moves slow-scale to the second when
		// it joins the first: every replica computes this same assignment.
		var first, second string
		for i := 0; second == ""; i++ {
			a, b := fmt.Sprintf("hs%d-0", i), fmt.Sprintf("hs%d-1", i)
			ring, err := shard.NewRing([]string{a, b}, shard.RingOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if assign, _ := ring.Place(names, nil); assign["slow-scale"] == b {
				first, second = a, b
			}
		}
		procs := map[string]*proc{first: start(t, bin, kc, first)}
		defer stopAll(t, procs)
		arrived := hook.arm("slow-scale")
		slowCluster(t, "slow-scale", "slow-scale")
		<-arrived
		if got := holders(t)["slow-scale"]; got != first {
			t.Fatalf("slow-scale held by %q, want %s", got, first)
		}
		procs[second] = start(t, bin, kc, second)
		draining(t, procs[first], "slow-scale")
		hook.let("slow-scale")
		planned(t, "slow-scale", "slow-scale", second)
	})

	t.Run("Cordon", func(t *testing.T) {
		ids := []string{"hc-0", "hc-1"}
		procs, from := inFlight(t, hook, bin, kc, ids, "slow-cordon")
		defer stopAll(t, procs)
		if out, err := exec.Command(bin, "cordon", from, "--kubeconfig", kc, "--namespace", ns0).CombinedOutput(); err != nil {
			t.Fatalf("cordon: %v\n%s", err, out)
		}
		draining(t, procs[from], "slow-cordon")
		hook.let("slow-cordon")
		planned(t, "slow-cordon", "slow-cordon", other(ids, from))
		if out, err := exec.Command(bin, "uncordon", from, "--kubeconfig", kc, "--namespace", ns0).CombinedOutput(); err != nil {
			t.Fatalf("uncordon: %v\n%s", err, out)
		}
	})

	t.Run("SIGKILL", func(t *testing.T) {
		ids := []string{"hk-0", "hk-1"}
		procs, from := inFlight(t, hook, bin, kc, ids, "slow-kill")
		defer stopAll(t, procs)
		if err := procs[from].cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-procs[from].exited
		delete(procs, from)
		hook.let("slow-kill")
		if got := releaseHistory(t, "slow-kill"); got != "[1:pending-install]" {
			t.Logf("history right after the kill: %s", got)
		}
		installed := installedOn(t, "slow-kill", other(ids, from))
		if got := releaseHistory(t, "slow-kill"); got != "[1:deployed]" {
			t.Fatalf("slow-kill: Helm history %s after the crash take-over, want [1:deployed]", got)
		}
		if !strings.Contains(installed.Message, "found revision 1 pending-install") {
			t.Fatalf("slow-kill: Installed does not say what the successor found: %s", installed.Message)
		}
		poll(t, 10*time.Second, "a HelmRecovered event on slow-kill", func() bool {
			for _, e := range clusterEvents(t, "slow-kill") {
				if strings.HasPrefix(e, v1alpha1.ReasonHelmRecovered+": ") && strings.Contains(e, "no failed revision") {
					return true
				}
			}
			return false
		})
		t.Logf("slow-kill: Installed: %s", installed.Message)
	})

	// interrupted checks an install cut at one of its writes: Installed
	// says HelmInterrupted and no failed revision was recorded; once the
	// hook lets creations through, the next try redoes the install at
	// revision 1 and says what it found.
	interrupted := func(t *testing.T, cluster string, owner string) {
		t.Helper()
		var cond *metav1.Condition
		poll(t, 60*time.Second, cluster+" Installed=False HelmInterrupted", func() bool {
			var rc v1alpha1.RemoteCluster
			if err := env.Client.Get(t.Context(), client.ObjectKey{Name: cluster}, &rc); err != nil {
				t.Fatal(err)
			}
			cond = meta.FindStatusCondition(rc.Status.Conditions, v1alpha1.ConditionInstalled)
			if got := releaseHistory(t, cluster); strings.Contains(got, "failed") {
				t.Fatalf("%s: Helm history %s after the cut: a failed revision (Installed: %v)", cluster, got, cond)
			}
			return cond != nil && cond.Reason == v1alpha1.ReasonHelmInterrupted
		})
		t.Logf("%s: Installed: %s", cluster, cond.Message)
		hook.let(cluster)
		installed := installedOn(t, cluster, owner)
		if got := releaseHistory(t, cluster); got != "[1:deployed]" {
			t.Fatalf("%s: Helm history %s after the retry, want [1:deployed]", cluster, got)
		}
		if !strings.Contains(installed.Message, "found revision 1 pending-install") {
			t.Fatalf("%s: Installed does not say what the retry found: %s", cluster, installed.Message)
		}
		t.Logf("%s: Installed: %s", cluster, installed.Message)
	}

	t.Run("WriteBound", func(t *testing.T) {
		procs, from := inFlight(t, hook, bin, kc, []string{"hb-0"}, "slow-bound")
		defer stopAll(t, procs)
		// The hook is held until let: the server gives up on its creation
		// at the timeout the fence gave it (the bound of one write).
		interrupted(t, "slow-bound", from)
	})

	t.Run("Lapse", func(t *testing.T) {
		procs, from := inFlight(t, hook, bin, kc, []string{"hl-0"}, "slow-lapse")
		defer stopAll(t, procs)
		p := procs[from].cmd.Process
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(leaseDuration + time.Second) // the membership Lease expires
		if err := p.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		interrupted(t, "slow-lapse", from)
		b, err := os.ReadFile(procs[from].log)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "Membership lapsed") && !strings.Contains(string(b), "Membership lost") {
			t.Fatalf("%s did not lapse: the test staged no lapse", from)
		}
	})
}
