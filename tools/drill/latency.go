package drill

import (
	"context"
	"fmt"
	"net/url"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/netproxy"
)

// behindLatency puts every remote API server behind a loopback proxy that
// adds Options.RemoteLatency to each round trip, and points every cluster's
// kubeconfig Secret through its remote's proxy, before any replica starts:
// the replicas reach their remote clusters as across a WAN, while the
// drill's own checks read them directly.
func (r *Runner) behindLatency(ctx context.Context) error {
	proxied := make([][]byte, len(r.cp.Remotes))
	for i, rc := range r.cp.Remotes {
		target, err := url.Parse(rc.Config.Host)
		if err != nil {
			return err
		}
		p, err := netproxy.New(target.Host)
		if err != nil {
			return err
		}
		p.SetLatency(r.o.RemoteLatency)
		r.latency = append(r.latency, p)
		if proxied[i], err = through(rc.KubeConfig, p); err != nil {
			return fmt.Errorf("kubeconfig of %s: %w", rc.Name, err)
		}
	}
	for _, cl := range r.clusters {
		if err := localcluster.WriteKubeConfigSecret(ctx, r.c, Namespace, cl.Name+"-kubeconfig", localcluster.DefaultSecretKey, proxied[cl.Remote]); err != nil {
			return err
		}
	}
	return nil
}

// through returns kubeconfig with every cluster's server at proxy p.
func through(kubeconfig []byte, p *netproxy.Proxy) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + p.Addr()
	}
	return clientcmd.Write(*cfg)
}
