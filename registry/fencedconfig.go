package registry

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"k8s.io/client-go/rest"
)

// FencedConfig returns a copy of cfg, a rest.Config of cluster, for clients
// made outside the registry that build their own HTTP clients from a
// rest.Config (Helm's install and upgrade). Every write request (any method
// but GET, HEAD and OPTIONS) first passes fence and is bounded by its
// deadline: a write the fence refuses is never sent, and one still under way
// at the deadline is cut off. Reads pass untouched.
//
// Unlike the registry's own clients, the calls are not drained by Stop: the
// caller runs them inside the coordinator's WithOwnership, which a hand-over
// waits for.
func FencedConfig(cfg *rest.Config, cluster string, fence Fence) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &fencedTransport{next: rt, cluster: cluster, fence: fence}
	})
	return cfg
}

type fencedTransport struct {
	next    http.RoundTripper
	cluster string
	fence   Fence
}

func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return t.next.RoundTrip(req)
	}
	deadline, err := t.fence.WriteDeadline(t.cluster)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFenced, err)
	}
	if deadline.IsZero() {
		return t.next.RoundTrip(req)
	}
	ctx, cancel := context.WithDeadline(req.Context(), deadline)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// WrappedRoundTripper lets client-go reach the transport underneath (to
// close its idle connections).
func (t *fencedTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// cancelOnClose ends a request's context once its response has been read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
