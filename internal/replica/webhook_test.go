package replica_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/controllers/replicate"
	"github.com/clustershard/clustershard/controllers/replication"
	"github.com/clustershard/clustershard/internal/replica"
)

// specWebhook is a validating admission webhook served over TLS on
// loopback that refuses any update changing spec, as Chaos Mesh's does
// ("Cannot update chaos spec"). It can be taken down and brought back on
// the same address.
type specWebhook struct {
	t        *testing.T
	addr     string
	cert     tls.Certificate
	caBundle []byte
	srv      *http.Server
	calls    atomic.Int64
	denied   atomic.Int64
}

func newSpecWebhook(t *testing.T) *specWebhook {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	w := &specWebhook{t: t, cert: cert, caBundle: certPEM}
	w.up("127.0.0.1:0")
	t.Cleanup(w.down)
	return w
}

func (w *specWebhook) up(addr string) {
	w.t.Helper()
	var l net.Listener
	var err error
	for range 50 { // the address was just released: retry briefly
		if l, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		w.t.Fatal(err)
	}
	w.addr = l.Addr().String()
	w.srv = &http.Server{Handler: http.HandlerFunc(w.review), TLSConfig: &tls.Config{Certificates: []tls.Certificate{w.cert}}, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := w.srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.t.Errorf("webhook server: %v", err)
		}
	}()
}

func (w *specWebhook) down() {
	if w.srv != nil {
		_ = w.srv.Close()
		w.srv = nil
	}
}

func (w *specWebhook) review(rw http.ResponseWriter, r *http.Request) {
	w.calls.Add(1)
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "bad review", http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	if review.Request.Operation == admissionv1.Update {
		var before, after struct {
			Spec map[string]any `json:"spec"`
		}
		_ = json.Unmarshal(review.Request.OldObject.Raw, &before)
		_ = json.Unmarshal(review.Request.Object.Raw, &after)
		if !reflect.DeepEqual(before.Spec, after.Spec) {
			w.denied.Add(1)
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: "Cannot update chaos spec"}
		}
	}
	review.Response, review.Request = resp, nil
	_ = json.NewEncoder(rw).Encode(review)
}

// register installs the webhook in remote 0 for StrictChaos writes in ns,
// with failurePolicy Fail as Chaos Mesh's chart does, and waits until the
// API server calls it (a dry-run create is reviewed like a real one).
func (w *specWebhook) register(ns string) {
	t := w.t
	t.Helper()
	ctx := t.Context()
	fail, none, timeout := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone, int32(2)
	url := "https://" + w.addr + "/validate"
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "strictchaos-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "vstrictchaos.example.clustershard.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: w.caBundle},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{examplev1alpha1.GroupVersion.Group}, APIVersions: []string{examplev1alpha1.GroupVersion.Version},
					Resources: []string{"strictchaos"},
				},
			}},
		}},
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
		return w.calls.Load() > 0
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
	run := startReplicaWith(t, "hook-auto", func(o *replica.Options) { o.Kinds = []replication.Kind{strictKind} })
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
		return strictCopy(t, ns, src.Name) != nil && o.Reason == replicate.ReasonSynced
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
		return o.Reason == replicate.ReasonRecreating && strings.Contains(o.Message, "Cannot update chaos spec") &&
			s.Annotations[replication.RemoteFinalizersAnnotation] == "chaos-mesh/records" && c != nil && c.Reason == replicate.ReasonRecreating
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
			o.Reason == replicate.ReasonSynced && o.SpecHash == hash && strings.Contains(o.Message, "re-created") &&
			strings.Contains(o.Message, "Cannot update chaos spec") && s.Annotations[replication.RemoteFinalizersAnnotation] == ""
	})
	_, o, _ := strictOutcome(t, ns, src.Name)
	t.Logf("re-created: %+v", o)

	// The webhook is down (failurePolicy Fail): every write is refused;
	// the source says why, the copy stays, and the change lands once the
	// webhook is back.
	addr, before := hook.addr, strictCopy(t, ns, src.Name)
	hook.down()
	hash = editStrict(t, ns, src.Name, func(s *examplev1alpha1.StrictChaosSpec) { s.Duration = "90s" })
	eventually(t, 30*time.Second, "WebhookUnavailable on the source", func() bool {
		_, o, c := strictOutcome(t, ns, src.Name)
		return o.Status == "False" && o.Reason == replicate.ReasonWebhookUnavailable && strings.Contains(o.Message, "failed calling webhook") &&
			c != nil && c.Status == "False" && c.Reason == replicate.ReasonWebhookUnavailable
	})
	_, o, _ = strictOutcome(t, ns, src.Name)
	t.Logf("webhook down: %+v", o)
	time.Sleep(2 * time.Second) // a window of retries in which the copy must stay as it is
	if cp := strictCopy(t, ns, src.Name); cp == nil || cp.UID != before.UID || cp.DeletionTimestamp != nil || cp.Spec.Duration != "60s" {
		t.Fatalf("a copy behind a webhook that is down was changed: %+v", cp)
	}
	back := time.Now()
	hook.up(addr)
	eventually(t, 2*replicate.MaxRetryDelay, "the change through once the webhook is back", func() bool {
		cp := strictCopy(t, ns, src.Name)
		_, o, _ := strictOutcome(t, ns, src.Name)
		return cp != nil && cp.Spec.Duration == "90s" && o.Reason == replicate.ReasonSynced && o.SpecHash == hash
	})
	t.Logf("webhook back: synced %v later", time.Since(back).Round(100*time.Millisecond))

	// Apply: the refusal is reported with the remote's words; the copy stays.
	run.stop()
	applyKind := strictKind
	applyKind.Update = replication.UpdateApply
	run = startReplicaWith(t, "hook-apply", func(o *replica.Options) { o.Kinds = []replication.Kind{applyKind} })
	before = strictCopy(t, ns, src.Name)
	denied := hook.denied.Load()
	hash = editStrict(t, ns, src.Name, func(s *examplev1alpha1.StrictChaosSpec) { s.Duration = "120s" })
	eventually(t, 60*time.Second, "WebhookRefused with the remote's message", func() bool {
		_, o, _ := strictOutcome(t, ns, src.Name)
		return o.Reason == replicate.ReasonWebhookRefused && strings.Contains(o.Message, "Cannot update chaos spec") && o.SpecHash == hash
	})
	if cp := strictCopy(t, ns, src.Name); cp == nil || cp.UID != before.UID || cp.Spec.Duration != "90s" || hook.denied.Load() == denied {
		t.Fatalf("Apply must leave a refused copy as it is: %+v", cp)
	}

	// Recreate: the copy is re-created without an update being tried.
	run.stop()
	recreateKind := strictKind
	recreateKind.Update = replication.UpdateRecreate
	startReplicaWith(t, "hook-recreate", func(o *replica.Options) { o.Kinds = []replication.Kind{recreateKind} })
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
			o.Reason == replicate.ReasonSynced && o.SpecHash == hash && strings.Contains(o.Message, "update strategy Recreate, the spec changed")
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
