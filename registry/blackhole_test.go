package registry_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/registry"
	"github.com/clustershard/clustershard/test/admissionhook"
	"github.com/clustershard/clustershard/test/netproxy"
)

// slowWebhook is a validating admission webhook on loopback that allows
// every request after a delay, calling onReview first (dry runs pass at
// once).
type slowWebhook struct {
	*admissionhook.Server
	delay    time.Duration
	onReview atomic.Pointer[func()]
}

func newSlowWebhook(t *testing.T, delay time.Duration) *slowWebhook {
	t.Helper()
	w := &slowWebhook{delay: delay}
	srv, err := admissionhook.New(func(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if f := w.onReview.Load(); f != nil && (req.DryRun == nil || !*req.DryRun) {
			(*f)()
			time.Sleep(w.delay)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Down)
	w.Server = srv
	return w
}

// register makes remote 0 call the webhook for ConfigMaps created in ns,
// with failurePolicy Fail, and waits until it does.
func (w *slowWebhook) register(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "slow-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{w.Webhook("slow.registry-test.clustershard.io", ns, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}, 10*time.Second)},
	}
	if err := env.RemoteClients[0].Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.RemoteClients[0].Delete(context.Background(), cfg) })
	ensureNamespace(t, env.RemoteClients[0], ns)
	eventually(t, 30*time.Second, "the webhook called by the remote API server", func() bool {
		_ = env.RemoteClients[0].Create(ctx, configMap(ns, "webhook-probe", nil), client.DryRunAll)
		return w.Calls() > 0
	})
}

// A write the remote API server has received, whose connection then stops
// forwarding (a black hole: the client's cancellation never arrives), is
// still processed after its writer gave up at the fence deadline: staged
// with a webhook that takes 3 s and holds the connection when it is called.
// Without a server-side timeout (a plain client bounded by its context, as
// the fence was before) the write commits 3 s later, long after the
// deadline; through FencedConfig it carries the time left as its `timeout`,
// the API server gives up at the deadline too and nothing commits, and the
// fence is told the write went unanswered.
func TestBlackHoledWriteDoesNotCommitPastTheFence(t *testing.T) {
	const ns, delay, ahead = "write-doubt", 3 * time.Second, time.Second
	w := newSlowWebhook(t, delay)
	w.register(t, ns)
	remote := env.Remotes[0].Config
	direct := env.RemoteClients[0]

	proxied := func(t *testing.T) (*rest.Config, *netproxy.Proxy) {
		cfg, p, err := netproxy.ForConfig(remote)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		hold := p.Hold
		w.onReview.Store(&hold)
		t.Cleanup(func() { w.onReview.Store(nil) })
		return cfg, p
	}
	create := func(t *testing.T, cfg *rest.Config, ctx context.Context, name string) error {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, name, nil), metav1.CreateOptions{})
		return err
	}
	committed := func(t *testing.T, name string) bool {
		err := direct.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	t.Run("without a server-side timeout the write commits late", func(t *testing.T) {
		cfg, p := proxied(t)
		t.Cleanup(func() { _ = direct.Delete(context.Background(), configMap(ns, "unfenced", nil)) })
		ctx, cancel := context.WithTimeout(t.Context(), ahead)
		defer cancel()
		if err := create(t, cfg, ctx, "unfenced"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("want the client cut at its deadline, got %v", err)
		}
		time.Sleep(delay + time.Second) // the webhook answers; the server goes on
		if !committed(t, "unfenced") {
			t.Fatal("staging failed: the unfenced write did not commit after its client gave up, so this test shows nothing")
		}
		p.Heal()
	})

	t.Run("through FencedConfig it does not commit", func(t *testing.T) {
		cfg, p := proxied(t)
		fence := &trackingFence{ahead: ahead}
		start := time.Now()
		err := create(t, registry.FencedConfig(cfg, "c", fence), t.Context(), "fenced")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("want the write cut at the fence deadline, got %v", err)
		}
		time.Sleep(delay + time.Second)
		if committed(t, "fenced") {
			t.Fatal("a write sent with the fence's time left as its server-side timeout committed after the deadline")
		}
		if _, inflight, unanswered := fence.counts(); inflight != 0 || unanswered != 1 {
			t.Fatalf("in flight %d, unanswered %d: want the write reported in doubt", inflight, unanswered)
		}
		// The write may land until the server-side timeout it carried runs
		// out: the time left before the fence deadline, counted from when it
		// was sent. So the doubt reported ends near that deadline, and
		// nowhere near the 60 s an API server allows a write without one.
		fence.mu.Lock()
		issued, sd := fence.issued[len(fence.issued)-1], fence.servers[0]
		fence.mu.Unlock()
		if sd.Before(issued.Add(-time.Millisecond)) || !sd.Before(issued.Add(ahead)) {
			t.Errorf("in doubt until %v after the fence deadline it was sent under (%v after the write began): want the fence's time left, sent as the server-side timeout", sd.Sub(issued), sd.Sub(start))
		}
		p.Heal()
		time.Sleep(time.Second) // what was held back arrives: still nothing
		if committed(t, "fenced") {
			t.Fatal("the held write committed once the connection healed")
		}
	})
}
