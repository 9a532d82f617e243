package registry

import (
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Live makes a Get through a remote client (WithClient) read the remote API
// server instead of the remote manager's cache. Remote clients read typed
// and unstructured objects from the cache, which lags behind the server by
// a watch event: a decision that must not act on a stale view (say, that a
// copy is gone, so its source may be released) reads live.
var Live client.GetOption = liveRead{}

type liveRead struct{}

// ApplyToGet implements client.GetOption; the guard reads the option.
func (liveRead) ApplyToGet(*client.GetOptions) {}

// wantsLive reports whether opts ask for a live read, and returns the
// others.
func wantsLive(opts []client.GetOption) (bool, []client.GetOption) {
	i := slices.IndexFunc(opts, func(o client.GetOption) bool { _, ok := o.(liveRead); return ok })
	if i < 0 {
		return false, opts
	}
	return true, slices.Delete(slices.Clone(opts), i, i+1)
}
