package registry

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/internal/remote"
)

// prober checks a remote API server's /version.
type prober struct {
	rc      rest.Interface
	timeout time.Duration
}

func newProber(cfg *rest.Config, timeout time.Duration) (*prober, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for probes: %w", err)
	}
	return &prober{rc: dc.RESTClient(), timeout: timeout}, nil
}

// probe returns the remote server version and the probe's latency.
func (p *prober) probe(ctx context.Context) (string, time.Duration, error) {
	return remote.Probe(ctx, p.rc, p.timeout)
}

// probeLoop probes the remote API server every interval until the gate
// closes; threshold failures in a row make the entry Unhealthy, the next
// success Running again.
func (e *entry) probeLoop(p *prober, interval time.Duration, threshold int) {
	defer close(e.probeDone)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-e.gate.ctx.Done():
			return
		case <-ticker.C:
		}
		ver, latency, err := p.probe(e.gate.ctx)
		if e.gate.ctx.Err() != nil {
			return
		}
		metrics.RemoteProbeDuration.Observe(latency.Seconds())
		if err != nil {
			metrics.RemoteProbeFailures.Inc()
		}
		e.mu.Lock()
		e.info.ProbeLatency = latency
		if err == nil {
			e.info.ServerVersion = ver
			e.info.ProbeFailures = 0
		} else {
			e.info.ProbeFailures++
		}
		failures, state := e.info.ProbeFailures, e.state
		e.mu.Unlock()
		switch {
		case err == nil && state == StateUnhealthy:
			e.log.Info("Remote API server reachable again")
			e.setState(StateRunning, nil)
		case err != nil && failures >= threshold && state == StateRunning:
			e.log.Error(err, "Remote API server unreachable", "failures", failures)
			e.setState(StateUnhealthy, fmt.Errorf("%d probes failed in a row: %w", failures, err))
		}
	}
}
