package helmrelease

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrInterrupted says a Helm operation stopped writing because one of its
// writes ended without the server's decision: the revision it was making is
// left pending (never recorded failed), and the next Ensure redoes it.
var ErrInterrupted = errors.New("the Helm operation was interrupted")

// An interruption, unlike a failure, is not the chart's doing: a write whose
// outcome is unknown or that was never sent. Helm answers every error of an
// install or upgrade by recording the revision failed (one more write), and
// a failed revision is what a user reads in helm history and alerts on. When
// the cause is the ownership fence (a write refused or cut at its deadline,
// a server-side timeout the fence set so that a write cannot land after
// another owner took the cluster) or the connection, that record would be
// the controller's own doing, and it would land while the outcome of the
// write before it is in doubt. So the first such write stops the operation:
// every later write of it is refused here, Helm's failure record included,
// and the revision stays pending-*, which Ensure recognises as an operation
// that is not running any more and redoes at the same revision number.
//
// A write ends without a decision when no answer came (the fence refused or
// cut it, the connection broke or timed out) or when the answer is a server
// error (5xx: a timeout, an internal error) that does not ask to be retried
// (Retry-After: the server says it did nothing, and client-go retries it).
// A refusal with a decision (4xx: invalid, forbidden, a conflict, a webhook
// that denies) is the chart's failure and recorded as Helm records it.

// interrupting is the transport of a Client: it refuses the writes of an
// operation that was interrupted.
type interrupting struct {
	next http.RoundTripper
	c    *Client
}

func (t *interrupting) RoundTrip(req *http.Request) (*http.Response, error) {
	if !isWrite(req) {
		return t.next.RoundTrip(req)
	}
	if cause := t.c.interruption(); cause != nil {
		return nil, fmt.Errorf("%w: %s %s not sent: an earlier write of the operation ended without a decision (%w)", ErrInterrupted, req.Method, req.URL.Path, cause)
	}
	resp, err := t.next.RoundTrip(req)
	switch {
	case err != nil:
		t.c.interrupt(fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err))
	case resp.StatusCode >= 500 && resp.Header.Get("Retry-After") == "":
		t.c.interrupt(fmt.Errorf("%s %s: the server answered %s", req.Method, req.URL.Path, resp.Status))
	}
	return resp, err
}

// isWrite reports whether req may store something: any method but GET,
// HEAD and OPTIONS, and not a dry run.
func isWrite(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return !req.URL.Query().Has("dryRun")
}

// interrupt records the first write of the operation that ended without a
// decision.
func (c *Client) interrupt(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut == nil {
		c.cut = cause
		c.log.Info("A write of the Helm operation ended without a decision: the operation writes nothing more, and its revision stays pending for the next try", "cause", cause.Error())
	}
}

// interruption returns why the operation was interrupted, nil if it was not.
func (c *Client) interruption() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut
}

// begin starts an operation: an earlier one's interruption is forgotten.
func (c *Client) begin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = nil
}

// interrupted returns err, the outcome of an operation, as ErrInterrupted
// when the operation was interrupted (even when Helm reported success: its
// last record may not have been written).
func (c *Client) interrupted(err error) error {
	cause := c.interruption()
	if cause == nil {
		return err
	}
	msg := fmt.Sprintf("a write ended without a decision (%v), so the operation wrote nothing more: no failed revision was recorded, the release is left as the operation left it (pending or uninstalling), and the next try redoes it", cause)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInterrupted, msg, err)
	}
	return fmt.Errorf("%w: %s", ErrInterrupted, msg)
}
