package app

import (
	"go.uber.org/goleak"
)

// leakCheck snapshots the goroutines running now; the returned function
// reports (after a clean shutdown) the goroutines started since that are
// still running, or "" when there are none. Idle HTTP connections kept by
// the client transports for reuse are not leaks. Nor, because it is
// controller-runtime's and cannot be ended from outside, is the goroutine
// that waits for the initial sync of an event handler of a
// namespace-restricted remote manager stopped before that sync (its
// informers are stopped, the sync never comes); the registry gives a
// manager up to a second to sync before it stops it, which makes it rare.
func leakCheck() func() string {
	baseline := goleak.IgnoreCurrent()
	return func() string {
		err := goleak.Find(baseline,
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("net/http.(*http2ClientConn).readLoop"),
			goleak.IgnoreTopFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
			goleak.IgnoreTopFunction("sigs.k8s.io/controller-runtime/pkg/cache.newMultiNamespaceInformerHandlerRegistration.func1"),
		)
		if err == nil {
			return ""
		}
		msg := err.Error()
		if len(msg) > 4000 {
			msg = msg[:4000] + "…"
		}
		return msg
	}
}
