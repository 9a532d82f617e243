package remotecluster

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/netproxy"
)

// A running cluster whose remote API server fails its probes (here a black
// hole: connections accepted, nothing answered) is reported Connected=False
// at once: the reconcile makes no remote call (epoch check, install) that
// would wait out its timeout and hold a worker meanwhile.
func TestUnhealthyClusterIsReportedWithoutRemoteCalls(t *testing.T) {
	const name = "blackholed"
	p, err := netproxy.New(hostOf(t, env.Remotes[0].Config.Host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	cfg, err := clientcmd.Load(env.Remotes[0].KubeConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + p.Addr()
	}
	proxied, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	remoteCluster(t, name, name+"-kubeconfig", localcluster.DefaultSecretKey, proxied)
	r, reg, _ := newReconciler(name)
	if _, err := reconcileOnce(t, r, name); err != nil {
		t.Fatal(err)
	}
	if spawns, _ := reg.counts(); spawns != 1 {
		t.Fatalf("%d spawns, want 1", spawns)
	}

	p.Hold()
	reg.setUnhealthy(name, errors.New("3 probes failed in a row"))
	// A change of spec.install makes an install due too.
	rc := read(t, name)
	rc.Spec.Install = &v1alpha1.InstallSpec{Namespace: "changed-" + name}
	if err := env.Client.Update(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	// The bound only tells a hang from an answer: a remote call would wait
	// until it.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: name}})
	if ctx.Err() != nil {
		t.Fatalf("the reconcile waited on the black-holed remote until its deadline: %v", err)
	}
	if err == nil {
		t.Fatal("Reconcile succeeded; want the unreachable remote reported")
	}
	if cond := condition(t, name, v1alpha1.ConditionConnected); cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonUnreachable {
		t.Errorf("Connected = %s/%s (%s), want False/%s", cond.Status, cond.Reason, cond.Message, v1alpha1.ReasonUnreachable)
	}
	if cond := condition(t, name, v1alpha1.ConditionInstalled); cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonInstallPending {
		t.Errorf("Installed = %s/%s (%s) after spec.install changed, want False/%s", cond.Status, cond.Reason, cond.Message, v1alpha1.ReasonInstallPending)
	}
	p.Heal()
}

// hostOf is the host:port of a URL.
func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
