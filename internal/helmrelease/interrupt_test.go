package helmrelease

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
)

type answers func(*http.Request) (*http.Response, error)

func (a answers) RoundTrip(r *http.Request) (*http.Response, error) { return a(r) }

func status(code int, header ...string) answers {
	return func(r *http.Request) (*http.Response, error) {
		resp := &http.Response{StatusCode: code, Status: http.StatusText(code), Header: http.Header{}, Request: r}
		for i := 0; i+1 < len(header); i += 2 {
			resp.Header.Set(header[i], header[i+1])
		}
		return resp, nil
	}
}

// TestInterruptingTransport: a write without a decision (no answer, or a
// 5xx that does not ask for a retry) stops the operation's later writes,
// not its reads; a decided refusal (4xx), a dry run and a 503 with
// Retry-After do not; begin starts afresh.
func TestInterruptingTransport(t *testing.T) {
	cases := []struct {
		name      string
		method    string
		url       string
		next      answers
		interrupt bool
	}{
		{"conflict", http.MethodPut, "/api/v1/namespaces/a/secrets/x", status(http.StatusConflict), false},
		{"invalid", http.MethodPost, "/api/v1/namespaces/a/configmaps", status(http.StatusUnprocessableEntity), false},
		{"retry after", http.MethodPost, "/api/v1/namespaces/a/configmaps", status(http.StatusServiceUnavailable, "Retry-After", "1"), false},
		{"dry run", http.MethodPost, "/api/v1/namespaces/a/configmaps?dryRun=All", func(*http.Request) (*http.Response, error) { return nil, errors.New("reset") }, false},
		{"read", http.MethodGet, "/api/v1/namespaces/a/secrets", func(*http.Request) (*http.Response, error) { return nil, errors.New("reset") }, false},
		{"timeout", http.MethodPost, "/api/v1/namespaces/a/configmaps", status(http.StatusGatewayTimeout), true},
		{"internal", http.MethodDelete, "/api/v1/namespaces/a/configmaps/x", status(http.StatusInternalServerError), true},
		{"no answer", http.MethodPatch, "/api/v1/namespaces/a/configmaps/x", func(*http.Request) (*http.Response, error) { return nil, errors.New("fenced") }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{log: logr.Discard()}
			sent := 0
			rt := &interrupting{c: c, next: answers(func(r *http.Request) (*http.Response, error) {
				sent++
				if sent == 1 {
					return tc.next(r)
				}
				return status(http.StatusOK)(r)
			})}
			resp, _ := rt.RoundTrip(httptest.NewRequest(tc.method, tc.url, nil))
			if resp != nil && resp.Body != nil {
				_ = resp.Body.Close()
			}
			if got := c.interruption() != nil; got != tc.interrupt {
				t.Fatalf("interrupted = %v, want %v", got, tc.interrupt)
			}
			_, err := rt.RoundTrip(httptest.NewRequest(http.MethodPut, "/api/v1/namespaces/a/secrets/sh.helm.release.v1.x.v1", nil))
			if tc.interrupt != errors.Is(err, ErrInterrupted) {
				t.Fatalf("the next write: %v (interrupted %v)", err, tc.interrupt)
			}
			if tc.interrupt {
				if sent != 1 {
					t.Fatalf("the next write was sent after the interruption")
				}
				if _, err := rt.RoundTrip(httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/a/secrets", nil)); err != nil {
					t.Fatalf("a read after the interruption: %v", err)
				}
				if err := c.interrupted(nil); !errors.Is(err, ErrInterrupted) {
					t.Fatalf("the operation's outcome: %v", err)
				}
				c.begin()
				if _, err := rt.RoundTrip(httptest.NewRequest(http.MethodPut, "/api/v1/namespaces/a/secrets/x", nil)); err != nil {
					t.Fatalf("a write of the next operation: %v", err)
				}
			}
		})
	}
}
