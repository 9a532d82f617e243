package drill

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/test/admissionhook"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/netproxy"
	"github.com/clustershard/clustershard/tools/fleet"
)

// slowRemoteWriteFault holds one remote write of the busiest replica in a
// validating admission webhook of the remote API server, served by the
// runner on loopback, for a second longer than the renew deadline, while
// the connections of that cluster, which lead through a loopback proxy of
// the runner, forward nothing (a black hole), and SIGTERMs the replica
// while the write is held: it is in flight during the hand-over. The
// replica gives up on it at its fence deadline, but its cancellation never
// reaches the API server, which may still commit it; the write carries the
// time left as its server-side timeout, and the hand-over must leave the
// cluster's Lease to expire rather than release it while the write may
// still land. I1 then finds the write, ended whenever the API server ended
// it, in no other replica's authority.
func slowRemoteWriteFault(ctx context.Context, r *Runner, res *Result) error {
	victim, owned, err := r.victim(ctx)
	if err != nil {
		return err
	}
	res.Victim = victim
	if len(owned) == 0 {
		return fmt.Errorf("%s holds no cluster", victim)
	}
	cl := r.clusterNamed(owned[0])
	// The cluster's kubeconfig leads through a loopback proxy of the
	// runner, which black-holes the connections when the write is held: the
	// replica's cancellation never reaches the API server.
	proxy, restore, err := r.proxyCluster(ctx, cl)
	if err != nil {
		return err
	}
	defer func() {
		proxy.Heal()
		if err := restore(); err != nil {
			res.note("I4", "restore the kubeconfig of %s: %v", cl.Name, err)
		}
		_ = proxy.Close()
	}()
	hold := r.renewDeadline() + time.Second
	var armed atomic.Bool
	heldAt := make(chan time.Time, 1)
	hook, err := admissionhook.New(func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if (req.DryRun != nil && *req.DryRun) || !armed.CompareAndSwap(true, false) {
			return nil
		}
		proxy.Hold()
		heldAt <- time.Now()
		select {
		case <-ctx.Done(): // the API server gave up on the write
		case <-time.After(hold):
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer hook.Down()
	remote := r.remote(cl.Remote)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "drill-slow-" + cl.Name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{hook.Webhook("slow.drill.clustershard.io", cl.Scope, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{examplev1alpha1.GroupVersion.Group}, APIVersions: []string{examplev1alpha1.GroupVersion.Version},
				Resources: []string{"examplechaos"},
			},
		}, min(hold+5*time.Second, 30*time.Second))},
	}
	if err := remote.Create(ctx, cfg); err != nil {
		return err
	}
	defer func() { _ = remote.Delete(context.WithoutCancel(ctx), cfg) }()
	probe := &examplev1alpha1.ExampleChaos{
		ObjectMeta: metav1.ObjectMeta{Namespace: cl.Scope, Name: "webhook-probe"},
		Spec:       examplev1alpha1.ExampleChaosSpec{Action: "pod-kill", Duration: "1s"},
	}
	if !pollUntil(ctx, 30*time.Second, func() bool {
		_ = remote.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return hook.Calls() > 0
	}) {
		return errors.New("the remote API server did not call the drill's webhook within 30s")
	}

	armed.Store(true)
	src := &examplev1alpha1.ExampleChaos{ObjectMeta: metav1.ObjectMeta{Namespace: cl.Scope, Name: "chaos-0"}}
	patch := fmt.Appendf(nil, `{"spec":{"duration":"%ds"}}`, 700+len(r.reps.all))
	if err := r.c.Patch(ctx, src, client.RawPatch(client.Merge.Type(), patch)); err != nil {
		return err
	}
	var held time.Time
	select {
	case held = <-heldAt:
	case <-time.After(30 * time.Second):
		armed.Store(false)
		return fmt.Errorf("%s wrote no copy in %s within 30s", victim, cl.Name)
	case <-ctx.Done():
		return ctx.Err()
	}
	healed := time.AfterFunc(time.Until(held.Add(hold+time.Second)), proxy.Heal)
	defer healed.Stop()
	at := time.Now()
	wait := r.termAsync(victim)
	res.Notes = append(res.Notes, fmt.Sprintf("a write of %s for %s held %v by the remote's webhook, its connection black-holed for %v; SIGTERM %v after it arrived",
		victim, cl.Name, hold, hold+time.Second, at.Sub(held).Round(time.Millisecond)))
	// Its other clusters are handed over as on any SIGTERM. The held one
	// waits for the write, cut at the fence deadline (at most a renew
	// deadline after the last renewal), then its Lease is left to expire
	// (a lease duration unchanged), since the write may still land.
	var others []string
	for _, c := range owned {
		if c != cl.Name {
			others = append(others, c)
		}
	}
	r.moved(ctx, res, "", others, at, gracefulBound)
	r.moved(ctx, res, "held", []string{cl.Name}, at, r.doubtBound())
	return errors.Join(wait(), r.startReady(ctx, victim))
}

// proxyCluster points cluster cl's kubeconfig Secret at a new loopback
// proxy to its remote API server and waits until its manager runs again
// through it; restore points it back and waits likewise.
func (r *Runner) proxyCluster(ctx context.Context, cl fleet.Cluster) (*netproxy.Proxy, func() error, error) {
	target, err := url.Parse(r.cp.Remotes[cl.Remote].Config.Host)
	if err != nil {
		return nil, nil, err
	}
	p, err := netproxy.New(target.Host)
	if err != nil {
		return nil, nil, err
	}
	var secret corev1.Secret
	key := client.ObjectKey{Namespace: Namespace, Name: cl.Name + "-kubeconfig"}
	if err := r.c.Get(ctx, key, &secret); err != nil {
		return nil, nil, errors.Join(err, p.Close())
	}
	orig := secret.Data[localcluster.DefaultSecretKey]
	proxied, err := through(orig, p)
	if err != nil {
		return nil, nil, errors.Join(err, p.Close())
	}
	write := func(kubeconfig []byte) error {
		at := time.Now()
		if err := localcluster.WriteKubeConfigSecret(ctx, r.c, Namespace, key.Name, localcluster.DefaultSecretKey, kubeconfig); err != nil {
			return err
		}
		if got := r.recovery(ctx, []string{cl.Name}, at, 30*time.Second); len(got) == 0 {
			return fmt.Errorf("the manager of %s did not run again within 30s of its kubeconfig's change", cl.Name)
		}
		return nil
	}
	if err := write(proxied); err != nil {
		return nil, nil, errors.Join(err, p.Close())
	}
	return p, func() error { return write(orig) }, nil
}
