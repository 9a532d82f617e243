package replica_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/controllers/replicate"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/replica"
	"github.com/clustershard/clustershard/test/admissionhook"
)

// specWebhook is a validating admission webhook served over TLS on
// loopback that refuses any update changing spec, as Chaos Mesh's does
// ("Cannot update chaos spec"). It can be taken down and brought back on
// the same address.
type specWebhook struct {
	*admissionhook.Server
	t      *testing.T
	denied atomic.Int64
}

func newSpecWebhook(t *testing.T) *specWebhook {
	t.Helper()
	w := &specWebhook{t: t}
	srv, err := admissionhook.New(w.review)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Down)
	w.Server = srv
	return w
}

func (w *specWebhook) review(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Update {
		return nil
	}
	var before, after struct {
		Spec map[string]any `json:"spec"`
	}
	_ = json.Unmarshal(req.OldObject.Raw, &before)
	_ = json.Unmarshal(req.Object.Raw, &after)
	if reflect.DeepEqual(before.Spec, after.Spec) {
		return nil
	}
	w.denied.Add(1)
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{Code: http.StatusForbidden, Message: "Cannot update chaos spec"}}
}

// register installs the webhook in remote 0 for StrictChaos writes in ns,
// with failurePolicy Fail as Chaos Mesh's chart does, and waits until the
// API server calls it (a dry-run create is reviewed like a real one).
func (w *specWebhook) register(ns string) {
	t := w.t
	t.Helper()
	ctx := t.Context()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "strictchaos-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{w.Webhook("vstrictchaos.example.clustershard.io", ns, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{examplev1alpha1.GroupVersion.Group}, APIVersions: []string{examplev1alpha1.GroupVersion.Version},
				Resources: []string{"strictchaos"},
			},
		}, 2*time.Second)},
	}
	if err := env.RemoteClients[0].Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.RemoteClients[0].Delete(context.Background(), cfg) })
	ensureNamespace(t, env.RemoteClients[0], ns)
	var probeErr error
	eventually(t, 30*time.Second, "the webhook called by the remote API server", func() bool {
		probe := &examplev1alpha1.StrictChaos{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "webhook-probe"}}
		probeErr = env.RemoteClients[0].Create(ctx, probe, client.DryRunAll)
		return w.Calls() > 0
	})
	t.Logf("webhook active (dry-run create: %v)", probeErr)
}

// strictCopy reads the copy of a StrictChaos source in remote 0.
func strictCopy(t *testing.T, ns, name string) *examplev1alpha1.StrictChaos {
	t.Helper()
	var cp examplev1alpha1.StrictChaos
	if err := env.RemoteClients[0].Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &cp); err != nil {
		return nil
	}
	return &cp
}

// editStrict changes a StrictChaos source's spec.
func editStrict(t *testing.T, ns, name string, edit func(*examplev1alpha1.StrictChaosSpec)) string {
	t.Helper()
	var s examplev1alpha1.StrictChaos
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	before := s.DeepCopy()
	edit(&s.Spec)
	if err := env.Client.Patch(t.Context(), &s, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	return specHash(t, &s)
}

// A remote whose validating webhook refuses spec changes, as Chaos Mesh's
// does. With the default strategy (Auto) a spec change is refused, the copy
// is re-created with the new spec after its remote finalizer is gone, and
// the source says so at each step. A webhook that is down (failurePolicy
// Fail) shows on the source as WebhookUnavailable and the copy is left as
// it is; once the webhook is back the change goes through. Apply reports the
// refusal and leaves the copy; Recreate re-creates without asking.
func TestRemoteWebhookRefusesSpecChanges(t *testing.T) {
	ctx := t.Context()
	const cluster, ns = "hook-east", "hook-ns"
	run := startReplicaWith(t, "hook-auto", func(o *replica.Options) { o.Kinds = []remotecopy.Kind{strictKind} })
	remoteCluster(t, cluster, 0)
	waitReady(t, cluster, 60*time.Second) // and the kind's CRD installed in the remote
	hook := newSpecWebhook(t)
	hook.register(ns)
	ensureNamespace(t, env.Client, ns)

	src := &examplev1alpha1.StrictChaos{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-kill"},
		Spec:       examplev1alpha1.StrictChaosSpec{RemoteCluster: cluster, Action: "pod-kill", Duration: "30s"},
	}
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the copy, and Synced on the source", func() bool {
		_, o, _ := strictOutcome(t, ns, src.Name)
		return strictCopy(t, ns, src.Name) != nil && o.Reason == v1alpha1.ReasonSynced
	})
	old := strictCopy(t, ns, src.Name)
	// Chaos Mesh's controller holds its finalizer on the copy until it has
	// recovered the experiment.
	old.Finalizers = append(old.Finalizers, "chaos-mesh/records")
	if err := env.RemoteClients[0].Update(ctx, old); err != nil {
		t.Fatal(err)
	}

	// Auto: the refused change re-creates the copy.
	hash := editStrict(t, ns, src.Name, func(s *examplev1alpha1.StrictChaosSpec) { s.Duration = "60s" })
	eventually(t, 30*time.Second, "RecreatingCopy with the remote's refusal and its finalizer on the source", func() bool {
		s, o, c := strictOutcome(t, ns, src.Name)
		return o.Reason == v1alpha1.ReasonRecreating && strings.Contains(o.Message, "Cannot update chaos spec") &&
			s.Annotations[v1alpha1.RemoteFinalizersAnnotation] == "chaos-mesh/records" && c != nil && c.Reason == v1alpha1.ReasonRecreating
	})
	s, _, _ := strictOutcome(t, ns, src.Name)
	t.Logf("spec changed, refused by the remote: annotations %v", s.Annotations)
	if cp := strictCopy(t, ns, src.Name); cp == nil || cp.DeletionTimestamp == nil || cp.Spec.Duration != "30s" {
		t.Fatalf("the old copy should be deleting with its old spec: %+v", cp)
	}
	cp := strictCopy(t, ns, src.Name)
	cp.Finalizers = nil
	if err := env.RemoteClients[0].Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a new copy with the new spec, and Synced saying it was re-created", func() bool {
		cp := strictCopy(t, ns, src.Name)
		s, o, _ := strictOutcome(t, ns, src.Name)
		return cp != nil && cp.UID != old.UID && cp.Spec.Duration == "60s" && cp.DeletionTimestamp == nil &&
			o.Reason == v1alpha1.ReasonSynced && o.SpecHash == hash && strings.Contains(o.Message, "re-created") &&
			strings.Contains(o.Message, "Cannot update chaos spec") && s.Annotations[v1alpha1.RemoteFinalizersAnnotation] == ""
	})
	_, o, _ := strictOutcome(t, ns, src.Name)
	t.Logf("re-created: %+v", o)

	// The webhook is down (failurePolicy Fail): every write is refused;
	// the source says why, the copy stays, and the change lands once the
	// webhook is back.
	addr, before := hook.Addr(), strictCopy(t, ns, src.Name)
	hook.Down()
	hash = editStrict(t, ns, src.Name, func(s *examplev1alpha1.StrictChaosSpec) { s.Duration = "90s" })
	eventually(t, 30*time.Second, "WebhookUnavailable on the source", func() bool {
		_, o, c := strictOutcome(t, ns, src.Name)
		return o.Status == "False" && o.Reason == v1alpha1.ReasonWebhookUnavailable && strings.Contains(o.Message, "failed calling webhook") &&
			c != nil && c.Status == "False" && c.Reason == v1alpha1.ReasonWebhookUnavailable
	})
	_, o, _ = strictOutcome(t, ns, src.Name)
	t.Logf("webhook down: %+v", o)
	time.Sleep(2 * time.Second) // a window of retries in which the copy must stay as it is
	if cp := strictCopy(t, ns, src.Name); cp == nil || cp.UID != before.UID || cp.DeletionTimestamp != nil || cp.Spec.Duration != "60s" {
		t.Fatalf("a copy behind a webhook that is down was changed: %+v", cp)
	}
	back := time.Now()
	if err := hook.Up(addr); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*replicate.MaxRetryDelay, "the change through once the webhook is back", func() bool {
		cp := strictCopy(t, ns, src.Name)
		_, o, _ := strictOutcome(t, ns, src.Name)
		return cp != nil && cp.Spec.Duration == "90s" && o.Reason == v1alpha1.ReasonSynced && o.SpecHash == hash
	})
	t.Logf("webhook back: synced %v later", time.Since(back).Round(100*time.Millisecond))

	// Apply: the refusal is reported with the remote's words; the copy stays.
	run.stop()
	applyKind := strictKind
	applyKind.Update = remotecopy.UpdateApply
	run = startReplicaWith(t, "hook-apply", func(o *replica.Options) { o.Kinds = []remotecopy.Kind{applyKind} })
	before = strictCopy(t, ns, src.Name)
	denied := hook.denied.Load()
	hash = editStrict(t, ns, src.Name, func(s *examplev1alpha1.StrictChaosSpec) { s.Duration = "120s" })
	eventually(t, 60*time.Second, "WebhookRefused with the remote's message", func() bool {
		_, o, _ := strictOutcome(t, ns, src.Name)
		return o.Reason == v1alpha1.ReasonWebhookRefused && strings.Contains(o.Message, "Cannot update chaos spec") && o.SpecHash == hash
	})
	if cp := strictCopy(t, ns, src.Name); cp == nil || cp.UID != before.UID || cp.Spec.Duration != "90s" || hook.denied.Load() == denied {
		t.Fatalf("Apply must leave a refused copy as it is: %+v", cp)
	}

	// Recreate: the copy is re-created without an update being tried.
	run.stop()
	recreateKind := strictKind
	recreateKind.Update = remotecopy.UpdateRecreate
	startReplicaWith(t, "hook-recreate", func(o *replica.Options) { o.Kinds = []remotecopy.Kind{recreateKind} })
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last seen: %s", last)
		}
	})
	eventually(t, 60*time.Second, "the copy re-created with the new spec by Recreate", func() bool {
		cp := strictCopy(t, ns, src.Name)
		_, o, _ := strictOutcome(t, ns, src.Name)
		last = fmt.Sprintf("outcome %+v; copy %+v", o, cp)
		return cp != nil && cp.UID != before.UID && cp.Spec.Duration == "120s" &&
			o.Reason == v1alpha1.ReasonSynced && o.SpecHash == hash && strings.Contains(o.Message, "update strategy Recreate, the spec changed")
	})
	_, o, _ = strictOutcome(t, ns, src.Name)
	t.Logf("Recreate: %+v", o)
	if err := env.Client.Delete(ctx, src); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "copy and source gone", func() bool {
		s, _, _ := strictOutcome(t, ns, src.Name)
		return s == nil && strictCopy(t, ns, src.Name) == nil
	})
}
