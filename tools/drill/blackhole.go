package drill

import (
	"context"
	"time"

	"github.com/clustershard/clustershard/test/netproxy"
)

// blackholeFault is a partition that closes nothing, on both of the
// victim's paths: its way to the management API server and the way to
// every cluster it holds (their kubeconfigs lead through proxies of the
// runner first) keep their connections (and accept new ones) but forward
// no byte either way for longer than the lease duration, so the victim
// learns of it only from its own timeouts (every call of an ownership pass
// is bounded). It fences itself on its local clock, the others take its
// clusters, and what was held back is delivered after the heal: a late
// renewal, which must not revive the victim's old ownership, and remote
// writes, which must not land in another replica's authority (I1).
func blackholeFault(ctx context.Context, r *Runner, res *Result) error {
	victim, owned, remotes, restore, err := r.victimBehindProxies(ctx, res)
	defer restore()
	if err != nil {
		return err
	}
	p := r.proxies[victim]
	at := time.Now()
	p.Hold()
	for _, rp := range remotes {
		rp.Hold()
	}
	// Healed past the lease duration, while the others take over: their
	// managers for these clusters reach them through the same proxies.
	healed := make(chan struct{})
	time.AfterFunc(r.o.LeaseDuration+time.Second, func() {
		p.Heal()
		for _, rp := range remotes {
			rp.Heal()
		}
		close(healed)
	})
	r.moved(ctx, res, "", owned, at, r.crashBound())
	<-healed // held past the lease duration even if the take-over was quick
	return nil
}

// victimBehindProxies picks the victim (res.Victim) and points the
// kubeconfigs of the clusters it owns through proxies of the runner
// (proxyClusters). It returns the victim, the clusters it owns once it has
// picked up the new kubeconfigs, and their proxies; call restore even when
// an error is returned.
func (r *Runner) victimBehindProxies(ctx context.Context, res *Result) (victim string, owned []string, remotes []*netproxy.Proxy, restore func(), err error) {
	restore = func() {}
	if victim, owned, err = r.victim(ctx); err != nil {
		return "", nil, nil, restore, err
	}
	res.Victim = victim
	if remotes, restore, err = r.proxyClusters(ctx, res, owned); err != nil {
		return victim, nil, nil, restore, err
	}
	owned, err = r.clustersOf(ctx, victim)
	return victim, owned, remotes, restore, err
}

// proxyClusters points the kubeconfigs of clusters through proxies of the
// runner (proxyCluster). restore heals and closes them and points the
// kubeconfigs back; call it even when an error is returned.
func (r *Runner) proxyClusters(ctx context.Context, res *Result, clusters []string) ([]*netproxy.Proxy, func(), error) {
	var proxies []*netproxy.Proxy
	var restores []func() error
	restore := func() {
		for i, p := range proxies {
			p.Heal()
			if err := restores[i](); err != nil {
				res.note("I4", "restore a kubeconfig: %v", err)
			}
			_ = p.Close()
		}
	}
	for _, c := range clusters {
		p, back, err := r.proxyCluster(ctx, r.clusterNamed(c))
		if err != nil {
			return proxies, restore, err
		}
		proxies, restores = append(proxies, p), append(restores, back)
	}
	return proxies, restore, nil
}
