package remote

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/connrotation"

	"github.com/clustershard/clustershard/api/v1alpha1"
)

// Credentials are the credentials of a rest.Config made by Rotatable:
// a bearer token, a username and password, or a client certificate, which
// Swap replaces under the clients built from that config without
// rebuilding them.
type Credentials struct {
	dialer *connrotation.Dialer

	mu       sync.RWMutex
	token    string
	username string
	password string
	cert     *tls.Certificate
}

// Rotatable returns a copy of cfg whose credentials can be swapped later
// (Credentials.Swap) while every client built from it keeps running: its
// transport is built here, once, with the client certificate read on each
// TLS handshake and the token or password added to each request from
// Credentials. Server, CA, TLS server name, proxy and impersonation stay
// fixed. It fails for a config whose credentials cannot be swapped this way
// (see CanRotate).
func Rotatable(cfg *rest.Config) (*rest.Config, *Credentials, error) {
	if !CanRotate(cfg) {
		return nil, nil, errors.New("the kubeconfig's credentials cannot be rotated in place (exec or auth-provider plugin, token file, or a custom transport)")
	}
	c := &Credentials{}
	if err := c.set(cfg); err != nil {
		return nil, nil, err
	}
	tlsConfig, err := transport.TLSConfigFor(&transport.Config{TLS: transport.TLSConfig{
		Insecure: cfg.Insecure, ServerName: cfg.ServerName, CAFile: cfg.CAFile, CAData: cfg.CAData, NextProtos: cfg.NextProtos,
		GetCertHolder: &transport.GetCertHolder{GetCert: c.clientCert},
	}})
	if err != nil {
		return nil, nil, err
	}
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	c.dialer = connrotation.NewDialer(dial)
	proxy := http.ProxyFromEnvironment
	if cfg.Proxy != nil {
		proxy = cfg.Proxy
	}
	// As client-go builds its own transports (transport/cache.go), with the
	// client certificate asked for on each handshake.
	rt := utilnet.SetTransportDefaults(&http.Transport{
		Proxy: proxy, TLSHandshakeTimeout: 10 * time.Second, TLSClientConfig: tlsConfig,
		MaxIdleConnsPerHost: 25, DialContext: c.dialer.DialContext, DisableCompression: cfg.DisableCompression,
	})
	out := rest.CopyConfig(cfg)
	out.TLSClientConfig = rest.TLSClientConfig{}
	out.BearerToken, out.Username, out.Password = "", "", ""
	out.Dial, out.Proxy = nil, nil
	out.Transport = rt
	out.Wrap(func(next http.RoundTripper) http.RoundTripper { return &authRoundTripper{c: c, next: next} })
	return out, c, nil
}

// CanRotate reports whether Rotatable can make cfg's credentials
// swappable: none of them comes from a plugin or a file, and cfg has no
// transport of its own.
func CanRotate(cfg *rest.Config) bool {
	return cfg.ExecProvider == nil && cfg.AuthProvider == nil && cfg.BearerTokenFile == "" &&
		cfg.CertFile == "" && cfg.KeyFile == "" && cfg.Transport == nil && cfg.WrapTransport == nil
}

// SameEndpoint reports whether a and b reach the same API server the same
// way: server, CA, TLS server name and verification, proxy and
// impersonation. Configs that differ only in credentials are the same
// endpoint, and a rotation between them can be made in place.
func SameEndpoint(a, b *rest.Config) bool {
	return a.Host == b.Host && a.APIPath == b.APIPath && a.Insecure == b.Insecure && a.ServerName == b.ServerName &&
		a.CAFile == b.CAFile && bytes.Equal(a.CAData, b.CAData) && slices.Equal(a.NextProtos, b.NextProtos) &&
		(a.Proxy == nil) == (b.Proxy == nil) && a.Impersonate.UserName == b.Impersonate.UserName &&
		a.Impersonate.UID == b.Impersonate.UID && slices.Equal(a.Impersonate.Groups, b.Impersonate.Groups)
}

// Swap replaces the credentials with cfg's. Requests sent from now on carry
// the new token or password; a new client certificate is used from the next
// TLS handshake, so Swap closes every connection (watches resume from where
// they were, on new connections). It fails, changing nothing, for a cfg
// whose credentials cannot be rotated.
func (c *Credentials) Swap(cfg *rest.Config) error {
	if !CanRotate(cfg) {
		return errors.New("the new kubeconfig's credentials cannot be rotated in place")
	}
	c.mu.RLock()
	old := c.cert
	c.mu.RUnlock()
	if err := c.set(cfg); err != nil {
		return err
	}
	c.mu.RLock()
	certChanged := !sameCert(old, c.cert)
	c.mu.RUnlock()
	if certChanged {
		c.dialer.CloseAll()
	}
	return nil
}

// set reads the credentials of cfg.
func (c *Credentials) set(cfg *rest.Config) error {
	var cert *tls.Certificate
	if len(cfg.CertData) > 0 || len(cfg.KeyData) > 0 {
		pair, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
		if err != nil {
			return &Error{Reason: v1alpha1.ReasonKubeConfigMalformed, Message: "the kubeconfig's client certificate and key do not load"}
		}
		cert = &pair
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.token, c.username, c.password, c.cert = cfg.BearerToken, cfg.Username, cfg.Password, cert
	return nil
}

// clientCert is the TLS client certificate callback: the current
// certificate, or none.
func (c *Credentials) clientCert() (*tls.Certificate, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.cert == nil {
		return &tls.Certificate{}, nil // present no certificate
	}
	return c.cert, nil
}

func sameCert(a, b *tls.Certificate) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.EqualFunc(a.Certificate, b.Certificate, bytes.Equal)
}

// authRoundTripper adds the current bearer token or basic credentials to
// requests that carry none.
type authRoundTripper struct {
	c    *Credentials
	next http.RoundTripper
}

func (rt *authRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return rt.next.RoundTrip(req)
	}
	rt.c.mu.RLock()
	token, user, pass := rt.c.token, rt.c.username, rt.c.password
	rt.c.mu.RUnlock()
	switch {
	case token != "":
		req = utilnet.CloneRequest(req)
		req.Header.Set("Authorization", "Bearer "+token)
	case user != "" || pass != "":
		req = utilnet.CloneRequest(req)
		req.SetBasicAuth(user, pass)
	}
	return rt.next.RoundTrip(req)
}

// WrappedRoundTripper returns the next round tripper, for client-go's
// transport debugging and connection management helpers.
func (rt *authRoundTripper) WrappedRoundTripper() http.RoundTripper { return rt.next }
