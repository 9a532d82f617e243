// Package admissionhook serves a validating admission webhook over TLS on
// loopback, with a self-signed certificate, for the drills and tests that
// stage what a remote cluster's webhooks do to clustershard's writes:
// refuse them, hold them, or be down.
package admissionhook

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
)

// ReviewFunc decides one admission request; nil allows it. ctx ends when
// the API server gives up on the call.
type ReviewFunc func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// Server is a validating admission webhook on a loopback address.
type Server struct {
	review   ReviewFunc
	cert     tls.Certificate
	caBundle []byte
	calls    atomic.Int64

	mu   sync.Mutex
	addr string
	srv  *http.Server
}

// New serves review on a free loopback port.
func New(review ReviewFunc) (*Server, error) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	s := &Server{review: review, cert: cert, caBundle: certPEM}
	return s, s.Up("127.0.0.1:0")
}

// Up serves on addr, retrying for a few seconds while the address is still
// taken (brought back on the address it was taken down from).
func (s *Server) Up(addr string) error {
	var l net.Listener
	var err error
	for range 50 {
		if l, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("admission webhook: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(s.serve), TLSConfig: &tls.Config{Certificates: []tls.Certificate{s.cert}, MinVersion: tls.VersionTLS12}, ReadHeaderTimeout: 5 * time.Second}
	s.mu.Lock()
	s.addr, s.srv = l.Addr().String(), srv
	s.mu.Unlock()
	go func() { _ = srv.ServeTLS(l, "", "") }()
	return nil
}

// Down stops serving: calls fail to connect until Up.
func (s *Server) Down() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Addr is the host:port the webhook is (or was last) served on.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Calls is how many reviews it has received.
func (s *Server) Calls() int64 { return s.calls.Load() }

// Webhook describes the webhook for a ValidatingWebhookConfiguration: it
// reviews the operations of rule in namespace, fails closed (failurePolicy
// Fail, as Chaos Mesh's chart installs its own) and is given timeout.
func (s *Server) Webhook(name, namespace string, rule admissionregistrationv1.RuleWithOperations, timeout time.Duration) admissionregistrationv1.ValidatingWebhook {
	url := "https://" + s.Addr() + "/validate"
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	seconds := int32(timeout / time.Second)
	return admissionregistrationv1.ValidatingWebhook{
		Name:                    name,
		ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: s.caBundle},
		FailurePolicy:           &fail,
		SideEffects:             &none,
		TimeoutSeconds:          &seconds,
		AdmissionReviewVersions: []string{"v1"},
		NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace}},
		Rules:                   []admissionregistrationv1.RuleWithOperations{rule},
	}
}

func (s *Server) serve(rw http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "bad review", http.StatusBadRequest)
		return
	}
	resp := s.review(r.Context(), review.Request)
	if resp == nil {
		resp = &admissionv1.AdmissionResponse{Allowed: true}
	}
	resp.UID = review.Request.UID
	review.Response, review.Request = resp, nil
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(review) // the API server may have given up
}
