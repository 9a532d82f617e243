package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// FencedConfig returns a copy of cfg, a rest.Config of cluster, whose
// transport fences writes: the remote manager's clients and event recorder,
// the clients of remote modules, Helm's install and upgrade. The fence sits
// in the innermost RoundTripper (client-go applies WrapTransport next to the
// HTTP transport, under authentication), after client-go's rate limiter and
// retries, so a write that waited there (a paused process, a low
// --remote-qps) is judged when it is really sent. Every write request (any
// method but GET, HEAD and OPTIONS):
//   - first passes fence: one it refuses is never sent;
//   - is bounded by the fence's deadline, and carries the time left as the
//     request's server-side timeout (the `timeout` query parameter, lowered
//     if the caller set a longer one), so the API server gives up on it by
//     then too, even when the client's cancellation cannot reach it (a
//     connection that stopped forwarding);
//   - is reported to the fence if it implements WriteTracker: when it
//     began (before the fence check), and until when, once it ended
//     without an answer, it may still be processed.
//
// Reads, dry runs and reviews pass untouched (storesNothing). The calls are not drained by Stop; the tracker is
// how their owner knows some are in flight or in doubt.
func FencedConfig(cfg *rest.Config, cluster string, fence Fence) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &fencedTransport{next: rt, cluster: cluster, fence: fence}
	})
	return cfg
}

// minWriteTime is the least time left before the fence deadline for a write
// to be sent at all: the server-side timeout is given in milliseconds.
const minWriteTime = time.Millisecond

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
	if storesNothing(req) {
		return t.next.RoundTrip(req)
	}
	// Reported before the fence check: a hand-over that passed the check
	// (so refuses it) or sees this write in flight, never neither.
	ended := t.began()
	deadline, err := t.fence.WriteDeadline(t.cluster)
	if err != nil {
		ended(time.Time{})
		return nil, fmt.Errorf("%w: %w", ErrFenced, err)
	}
	if deadline.IsZero() {
		out, sent := withSentTrace(req, nil)
		resp, err := t.next.RoundTrip(out)
		ended(inDoubtUntil(resp, err, sent, time.Now().Add(maxServerTimeout)))
		return resp, err
	}
	left := time.Until(deadline).Truncate(time.Millisecond)
	if left < minWriteTime {
		ended(time.Time{})
		return nil, fmt.Errorf("%w: the fence deadline of cluster %q has passed", ErrFenced, t.cluster)
	}
	// The server works on the write until the fence deadline, or until the
	// bound of a renewing fence; the client waits for the answer as long as
	// the server may work on it and the deadline holds or is extended, and
	// reads the answer's body as long as the deadline holds or is extended.
	server := left
	var wc *writeContext
	ctx, cancel := context.WithDeadline(req.Context(), deadline)
	if rf, ok := t.fence.(RenewingFence); ok {
		if bound, err := rf.WriteBound(t.cluster); err == nil && time.Until(bound) > left {
			// The server counts its timeout from when the request reaches
			// it: the request must be on its way within sendSlack, and the
			// timeout it carries leaves that slack out, so that the server
			// is done by bound however late the connection came up.
			now := time.Now()
			slack := min(sendSlack, bound.Sub(now)/4)
			server = bound.Sub(now.Add(slack)).Truncate(time.Millisecond)
			cancel()
			wc = followDeadline(req.Context(), t.fence, t.cluster, deadline, now.Add(slack), bound)
			ctx, cancel = wc, func() { wc.end(context.Canceled, "") }
		}
	}
	out := req.Clone(ctx)
	q := out.URL.Query()
	if cur, err := time.ParseDuration(q.Get("timeout")); err != nil || cur <= 0 || cur > server {
		q.Set("timeout", server.String())
		out.URL.RawQuery = q.Encode()
	}
	serverDeadline := time.Now().Add(server)
	if wc != nil {
		serverDeadline = wc.serverDeadline
	}
	out, sent := withSentTrace(out, wc)
	resp, err := t.next.RoundTrip(out)
	ended(inDoubtUntil(resp, err, sent, serverDeadline))
	if err != nil {
		cancel()
		return nil, wc.explain(t.cluster, sent.Load(), err)
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel, explain: func(err error) error { return wc.explain(t.cluster, true, err) }}
	return resp, nil
}

// sendSlack is the longest a write under a renewing fence may wait for a
// connection before its headers go out; the server-side timeout it carries
// is shortened by as much.
const sendSlack = time.Second

// writeContext is the context of a write under a renewing fence. It ends
// when its parent does; when its headers did not go out by sendBy; before
// the answer arrives, at serverDeadline (the server has given up on the
// write by then); and at any time, when the fence deadline passes without
// having been extended.
type writeContext struct {
	parent         context.Context
	serverDeadline time.Time
	done           chan struct{}
	once           sync.Once
	sent, heard    chan struct{} // closed once the headers went out, once the answer's arrived
	sendOnce       sync.Once
	hearOnce       sync.Once

	mu     sync.Mutex
	err    error
	fenced string // why the fence ended the write, "" otherwise
}

func (c *writeContext) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *writeContext) Done() <-chan struct{}       { return c.done }
func (c *writeContext) Value(key any) any           { return c.parent.Value(key) }
func (c *writeContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// end ends the context with err, once; fenced says why when the fence or
// its deadlines ended it.
func (c *writeContext) end(err error, fenced string) {
	c.once.Do(func() {
		c.mu.Lock()
		c.err, c.fenced = err, fenced
		c.mu.Unlock()
		close(c.done)
	})
}

// wrote records that the request's headers went out.
func (c *writeContext) wrote() { c.sendOnce.Do(func() { close(c.sent) }) }

// answered records that the answer's first byte arrived: the server's
// deadline no longer matters.
func (c *writeContext) answered() { c.hearOnce.Do(func() { close(c.heard) }) }

// explain wraps err, the error of a write whose context c is (nil: none),
// with why the fence cut it and whether it may still land.
func (c *writeContext) explain(cluster string, sent bool, err error) error {
	if c == nil || err == nil {
		return err
	}
	c.mu.Lock()
	why := c.fenced
	c.mu.Unlock()
	if why == "" {
		return err
	}
	if sent {
		return fmt.Errorf("%w: the write for cluster %q was cut (%s); it may still land until %s: %w", ErrFenced, cluster, why, c.serverDeadline.Format(time.RFC3339Nano), err)
	}
	return fmt.Errorf("%w: the write for cluster %q was not sent (%s): %w", ErrFenced, cluster, why, err)
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// followDeadline returns the context of a write for cluster under a
// renewing fence: its fence deadline is deadline, its headers must go out by
// sendBy, and its server gives up by serverDeadline. Each time the current
// fence deadline comes, WriteDeadline is asked again, and a later one keeps
// the write alive. A write thus runs for as long as authority lasts and the
// server may work on it, and no longer.
func followDeadline(parent context.Context, f Fence, cluster string, deadline, sendBy, serverDeadline time.Time) *writeContext {
	c := &writeContext{parent: parent, serverDeadline: serverDeadline, done: make(chan struct{}), sent: make(chan struct{}), heard: make(chan struct{})}
	go func() {
		sent, heard := c.sent, c.heard
		send := time.NewTimer(time.Until(sendBy))
		server := time.NewTimer(time.Until(serverDeadline))
		defer send.Stop()
		defer server.Stop()
		for {
			due := time.NewTimer(time.Until(deadline))
			select {
			case <-c.done:
				due.Stop()
				return
			case <-parent.Done():
				due.Stop()
				c.end(parent.Err(), "")
				return
			case <-sent:
				due.Stop()
				send.Stop()
				sent = nil // a nil channel: never selected again
				continue
			case <-heard:
				due.Stop()
				server.Stop()
				heard = nil
				continue
			case <-send.C:
				due.Stop()
				if closed(c.sent) {
					continue
				}
				c.end(context.DeadlineExceeded, "no connection to send it on in time")
				return
			case <-server.C:
				due.Stop()
				if closed(c.heard) {
					continue
				}
				c.end(context.DeadlineExceeded, "no answer within the server-side timeout")
				return
			case <-due.C:
			}
			next, err := f.WriteDeadline(cluster)
			if err == nil && time.Until(next) >= minWriteTime && next.After(deadline) {
				deadline = next
				continue
			}
			why := "ownership ended"
			if err != nil {
				why += ": " + err.Error()
			}
			c.end(context.DeadlineExceeded, why)
			return
		}
	}()
	return c
}

// storesNothing reports whether a request with a write method changes
// nothing in the API server, so it needs no fence and is never in doubt: a
// dry run, or a review (authentication.k8s.io, authorization.k8s.io: who am
// I, may I), which the API server answers without storing anything. The
// ownership epoch's own check is a dry run: counted as a write in doubt, a
// hand-over that cut it would leave the Lease to expire.
func storesNothing(req *http.Request) bool {
	if req.URL.Query().Get("dryRun") != "" {
		return true
	}
	p := req.URL.Path
	return req.Method == http.MethodPost &&
		(strings.HasPrefix(p, "/apis/authentication.k8s.io/") || strings.HasPrefix(p, "/apis/authorization.k8s.io/"))
}

// maxServerTimeout is the longest a kube-apiserver works on a request sent
// without a server-side timeout (its --request-timeout default).
const maxServerTimeout = 60 * time.Second

// began reports a write to the fence if it is a WriteTracker.
func (t *fencedTransport) began() func(doubtUntil time.Time) {
	tr, ok := t.fence.(WriteTracker)
	if !ok {
		return func(time.Time) {}
	}
	return tr.WriteBegan(t.cluster)
}

// withSentTrace returns req traced: the flag is set once its headers were
// written to a connection.
func withSentTrace(req *http.Request, wc *writeContext) (*http.Request, *atomic.Bool) {
	var sent atomic.Bool
	trace := &httptrace.ClientTrace{WroteHeaders: func() { sent.Store(true) }}
	if wc != nil {
		trace.WroteHeaders = func() { sent.Store(true); wc.wrote() }
		trace.GotFirstResponseByte = wc.answered
	}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace)), &sent
}

// inDoubtUntil is until when a write that ended so may still be processed by
// the server (serverDeadline), or zero if it cannot. A write is in doubt
// when it failed after its headers were sent (one that failed before, a
// refused dial or a TLS error, never reached the server), or when the server
// answered 500 or 504: a kube-apiserver answers a request that ran out of
// time while its handler may still be finishing the storage write.
func inDoubtUntil(resp *http.Response, err error, sent *atomic.Bool, serverDeadline time.Time) time.Time {
	switch {
	case err != nil && sent.Load():
		return serverDeadline
	case err != nil:
		return time.Time{}
	case resp.StatusCode == http.StatusInternalServerError, resp.StatusCode == http.StatusGatewayTimeout:
		return serverDeadline
	}
	return time.Time{}
}

// WrappedRoundTripper lets client-go reach the transport underneath (to
// close its idle connections).
func (t *fencedTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// cancelOnClose ends a request's context once its response has been read.
type cancelOnClose struct {
	io.ReadCloser
	cancel  context.CancelFunc
	explain func(error) error // says why a read was cut
}

// Read reads the answer; its end (EOF or an error) ends the request's
// context too, for callers that do not close a body they read through.
func (b *cancelOnClose) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			err = b.explain(err)
		}
		b.cancel()
	}
	return n, err
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
