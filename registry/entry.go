package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/fx"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/clustershard/clustershard/internal/metrics"
)

// entry is one remote cluster: its fx app, manager, gate and health.
type entry struct {
	name       string
	parent     context.Context // the registry's context
	cfg        *rest.Config
	namespaces []string
	log        logr.Logger
	gate       *gate
	stopGrace  time.Duration
	report     func(Event)

	app       *fx.App
	client    client.Client // the guarded remote client, set once started
	mgr       manager.Manager
	mgrDone   chan struct{} // closed when the manager goroutine returns
	startDone chan struct{} // closed when Spawn's start attempt has ended
	stopDone  chan struct{} // closed when the entry has left the registry
	probeDone chan struct{} // closed when the probe loop returns

	stopOnce sync.Once
	stopErr  error

	mu    sync.Mutex
	info  Info
	state State
}

func (e *entry) setState(s State, err error) {
	e.mu.Lock()
	if e.state == StateStopping && s != StateStopped {
		e.mu.Unlock()
		return // a stopping entry only moves on to Stopped
	}
	changed := e.state != s
	if changed {
		metrics.RemoteManagers.WithLabelValues(string(e.state)).Dec()
		if s != StateStopped {
			metrics.RemoteManagers.WithLabelValues(string(s)).Inc()
		}
	}
	e.state = s
	e.info.State, e.info.Err = s, err
	if changed {
		e.info.Since = time.Now()
	}
	e.mu.Unlock()
	if changed && e.report != nil {
		e.report(Event{Cluster: e.name, State: s, Err: err})
	}
}

func (e *entry) snapshot() Info {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.info
}

// managerExited records the end of the manager goroutine. An exit that Stop
// did not ask for marks the entry Failed; the process carries on.
func (e *entry) managerExited(err error) {
	e.mu.Lock()
	stopping := e.state == StateStopping
	e.mu.Unlock()
	if stopping {
		return
	}
	if err == nil {
		err = errors.New("remote manager exited unexpectedly")
	}
	e.log.Error(err, "Remote manager failed")
	e.setState(StateFailed, err)
}

// runningClient returns the remote client if the manager runs.
func (e *entry) runningClient() (client.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch e.state {
	case StateRunning, StateUnhealthy:
		return e.client, nil
	case StateStopping, StateStopped:
		return nil, fmt.Errorf("%w: cluster %q is stopping", ErrNotExist, e.name)
	case StateFailed:
		return nil, fmt.Errorf("%w: cluster %q failed: %w", ErrNotRunning, e.name, e.info.Err)
	default:
		return nil, fmt.Errorf("%w: cluster %q is %s", ErrNotRunning, e.name, e.state)
	}
}

// stop stops the entry once; concurrent and later callers wait for that stop.
// The gate closes first (no new remote call; calls in flight are cancelled),
// then the manager is stopped and waited for, then in-flight calls drain.
// remove is called once the manager has really exited, even if that happens
// after ctx has ended; until then the entry stays in the registry, so no
// second manager for the cluster can be spawned.
func (e *entry) stop(ctx context.Context, remove func()) error {
	select {
	case <-e.startDone:
	case <-ctx.Done():
		return fmt.Errorf("stop %q while it starts: %w", e.name, ctx.Err())
	}
	e.stopOnce.Do(func() {
		e.setState(StateStopping, nil)
		e.gate.close()
		// controller-runtime leaks a goroutine per event handler whose
		// informer never synced (multi_namespace_cache.go, handler
		// registrations). Give a manager that just started up to a second
		// to finish its initial sync before it is cancelled.
		if e.mgr != nil {
			syncCtx, cancel := context.WithTimeout(ctx, time.Second)
			e.mgr.GetCache().WaitForCacheSync(syncCtx)
			cancel()
		}
		errs := []error{}
		if err := e.app.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop remote app: %w", err))
		}
		errs = append(errs, e.gate.drain(ctx))
		finished := func() {
			<-e.mgrDone
			<-e.probeDone
			remove()
			e.setState(StateStopped, nil)
			close(e.stopDone)
		}
		if err := errors.Join(errs...); err != nil {
			e.stopErr = err
			e.log.Error(err, "Remote manager did not stop in time; it leaves the registry when it exits")
			go finished()
			return
		}
		finished()
	})
	if e.stopErr != nil {
		return e.stopErr
	}
	select {
	case <-e.stopDone:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop %q: %w", e.name, ctx.Err())
	}
}
