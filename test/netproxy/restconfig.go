package netproxy

import (
	"net/url"

	"k8s.io/client-go/rest"
)

// ForConfig starts a proxy to the API server cfg reaches and returns a copy
// of cfg that goes through it (the serving certificate names 127.0.0.1,
// which the proxy listens on).
func ForConfig(cfg *rest.Config) (*rest.Config, *Proxy, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, nil, err
	}
	p, err := New(u.Host)
	if err != nil {
		return nil, nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Host = "https://" + p.Addr()
	return cfg, p, nil
}
