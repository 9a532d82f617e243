package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// gate admits the API calls of one cluster's remote clients until the cluster
// is stopped. close refuses new calls and cancels the reads in flight; drain
// waits for every call to return. Writes in flight are not cancelled: a
// cancelled request may already be on its way and reach the remote API
// server after the client gave up (the drill's audit logs showed one arrive
// after its replica's authority had ended). A write runs until the server
// answers or its fence deadline passes, so once Stop has returned, every
// write of this cluster has been answered (or was cut off at the end of the
// replica's membership, which others wait out).
type gate struct {
	cluster string
	fence   Fence

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
	ctx      context.Context // cancelled by close
	cancel   context.CancelFunc
}

func newGate(parent context.Context, cluster string, fence Fence) *gate {
	ctx, cancel := context.WithCancel(parent)
	return &gate{cluster: cluster, fence: fence, ctx: ctx, cancel: cancel}
}

// enter admits one call. For writes it consults the fence and bounds the call
// by the fence's deadline, so a call delayed past the end of ownership (a
// paused process, a client-side rate limiter) is cancelled rather than sent.
func (g *gate) enter(ctx context.Context, write bool) (context.Context, func(), error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: cluster %q is stopping", ErrNotExist, g.cluster)
	}
	g.inflight.Add(1)
	g.mu.Unlock()

	callCtx, cancel := context.WithCancel(ctx)
	if write && g.fence != nil {
		deadline, err := g.fence.WriteDeadline(g.cluster)
		if err != nil {
			cancel()
			g.inflight.Done()
			return nil, nil, fmt.Errorf("%w: %w", ErrFenced, err)
		}
		if !deadline.IsZero() {
			cancel()
			callCtx, cancel = context.WithDeadline(ctx, deadline)
		}
	}
	stop := func() bool { return false }
	if !write {
		stop = context.AfterFunc(g.ctx, cancel)
	}
	return callCtx, func() {
		stop()
		cancel()
		g.inflight.Done()
	}, nil
}

// close refuses new calls and cancels the reads in flight.
func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cancel()
}

// drain waits until no call is in flight, or ctx ends.
func (g *gate) drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		g.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("remote calls of cluster %q still in flight: %w", g.cluster, ctx.Err())
	}
}

// withWatch lets a plain client.Client be wrapped by the interceptor package.
type withWatch struct{ client.Client }

func (withWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("watch is not available through a remote cluster client")
}

// guard wraps c so that every call passes the gate, and every write the
// fence; a Get with Live reads through live (uncached) instead of c.
func (g *gate) guard(c client.Client, live client.Reader) client.Client {
	read := func(ctx context.Context, call func(context.Context) error) error {
		callCtx, done, err := g.enter(ctx, false)
		if err != nil {
			return err
		}
		defer done()
		return call(callCtx)
	}
	write := func(ctx context.Context, call func(context.Context) error) error {
		callCtx, done, err := g.enter(ctx, true)
		if err != nil {
			return err
		}
		defer done()
		return call(callCtx)
	}
	return interceptor.NewClient(withWatch{c}, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if ok, rest := wantsLive(opts); ok {
				return read(ctx, func(ctx context.Context) error { return live.Get(ctx, key, obj, rest...) })
			}
			return read(ctx, func(ctx context.Context) error { return c.Get(ctx, key, obj, opts...) })
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			return read(ctx, func(ctx context.Context) error { return c.List(ctx, list, opts...) })
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return write(ctx, func(ctx context.Context) error { return c.Create(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return write(ctx, func(ctx context.Context) error { return c.Delete(ctx, obj, opts...) })
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			return write(ctx, func(ctx context.Context) error { return c.DeleteAllOf(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return write(ctx, func(ctx context.Context) error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return write(ctx, func(ctx context.Context) error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return write(ctx, func(ctx context.Context) error { return c.Apply(ctx, obj, opts...) })
		},
		SubResourceGet: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceGetOption) error {
			return read(ctx, func(ctx context.Context) error { return c.SubResource(sub).Get(ctx, obj, subObj, opts...) })
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			return write(ctx, func(ctx context.Context) error { return c.SubResource(sub).Create(ctx, obj, subObj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return write(ctx, func(ctx context.Context) error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return write(ctx, func(ctx context.Context) error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			return write(ctx, func(ctx context.Context) error { return c.SubResource(sub).Apply(ctx, obj, opts...) })
		},
	})
}

// FencedClient wraps c, a client of cluster made outside the registry (for
// example to install CRDs before a manager exists), so that every write first
// passes fence and is bounded by its deadline, like the registry's own
// clients. A Get with Live reads through c too.
func FencedClient(c client.Client, cluster string, fence Fence) client.Client {
	return newGate(context.Background(), cluster, fence).guard(c, c)
}
