package remotefence_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/clustershard/clustershard/internal/remotefence"
)

// pathCounter counts the requests of a rest.Config by URL path.
type pathCounter struct {
	mu    sync.Mutex
	paths []string
}

func (p *pathCounter) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			p.mu.Lock()
			p.paths = append(p.paths, req.Method+" "+req.URL.Path)
			p.mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

func (p *pathCounter) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.paths
	p.paths = nil
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func asked(paths []string, part string) bool {
	for _, p := range paths {
		if strings.Contains(p, part) {
			return true
		}
	}
	return false
}

// A raise with a Memo skips what an earlier raise with the same key learnt
// (who the user is, the namespace in place). It still reads the policy: an
// API server's admission may enforce a policy for a while after it was
// deleted, so a policy removed by hand is applied again, and the new epoch
// is enforced.
func TestMemoSkipsWhatDoesNotChange(t *testing.T) {
	ctx := t.Context()
	var count pathCounter
	cfg := count.wrap(env.Remotes[0].Config)
	var memo remotefence.Memo
	raiseWith := func() remotefence.Epoch {
		t.Helper()
		e, err := remotefence.Raise(ctx, cfg, remotefence.Options{Cluster: "memo", Memo: &memo, Key: "kubeconfig-hash"})
		if err != nil {
			t.Fatal(err)
		}
		if !e.Enforced {
			t.Fatalf("not enforced: %s: %s", e.Reason, e.Message)
		}
		return e
	}
	first := raiseWith()
	if p := count.take(); !asked(p, "selfsubjectreviews") || !asked(p, "validatingadmissionpolicies") {
		t.Fatalf("the first raise did not ask who it is and for the policy: %v", p)
	}
	second := raiseWith()
	if p := count.take(); asked(p, "selfsubjectreviews") || slices.Contains(p, "GET /api/v1/namespaces/"+remotefence.Namespace) {
		t.Errorf("a raise with the memo asked again: %v", p)
	}
	if second.Value <= first.Value {
		t.Errorf("epoch %d after %d", second.Value, first.Value)
	}

	adm := clientset(t, env.Remotes[0].Config).AdmissionregistrationV1()
	if err := adm.ValidatingAdmissionPolicyBindings().Delete(ctx, remotefence.Policy, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := adm.ValidatingAdmissionPolicies().Delete(ctx, remotefence.Policy, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	third := raiseWith()
	if p := count.take(); !asked(p, "validatingadmissionpolicies") {
		t.Errorf("the policy was removed, and the raise did not apply it again: %v", p)
	}
	if third.Value <= second.Value {
		t.Errorf("epoch %d after %d", third.Value, second.Value)
	}
	if _, err := adm.ValidatingAdmissionPolicies().Get(ctx, remotefence.Policy, metav1.GetOptions{}); err != nil {
		t.Errorf("policy not back: %v", err)
	}
}
