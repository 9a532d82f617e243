package remote_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/clustershard/clustershard/internal/remote"
)

// TestRotatableSwapsTheToken: a client built once from a Rotatable config
// sends the token of the last Swap, without being rebuilt.
func TestRotatableSwapsTheToken(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, BearerToken: "one", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	rot, creds, err := remote.Rotatable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(rot)
	if err != nil {
		t.Fatal(err)
	}
	get := func() string {
		resp, err := hc.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := get(); got != "Bearer one" {
		t.Fatalf("before the swap: %q", got)
	}
	next := rest.CopyConfig(cfg)
	next.BearerToken = "two"
	if err := creds.Swap(next); err != nil {
		t.Fatal(err)
	}
	if got := get(); got != "Bearer two" {
		t.Fatalf("after the swap: %q", got)
	}
	next.BearerToken, next.Username, next.Password = "", "u", "p"
	if err := creds.Swap(next); err != nil {
		t.Fatal(err)
	}
	if got := get(); got != "Basic dTpw" {
		t.Fatalf("after a swap to basic auth: %q", got)
	}
}

func TestCanRotateAndSameEndpoint(t *testing.T) {
	base := &rest.Config{Host: "https://a:6443", BearerToken: "x", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}
	if !remote.CanRotate(base) {
		t.Fatal("a token config cannot rotate")
	}
	for name, edit := range map[string]func(*rest.Config){
		"exec":       func(c *rest.Config) { c.ExecProvider = &clientcmdapi.ExecConfig{Command: "x"} },
		"token file": func(c *rest.Config) { c.BearerTokenFile = "/t" },
		"cert file":  func(c *rest.Config) { c.CertFile = "/c" },
	} {
		c := rest.CopyConfig(base)
		edit(c)
		if remote.CanRotate(c) {
			t.Errorf("%s: CanRotate", name)
		}
		if _, _, err := remote.Rotatable(c); err == nil {
			t.Errorf("%s: Rotatable accepted it", name)
		}
	}
	other := rest.CopyConfig(base)
	other.BearerToken, other.CertData = "y", []byte("cert")
	if !remote.SameEndpoint(base, other) {
		t.Error("configs differing in credentials only are not the same endpoint")
	}
	for name, edit := range map[string]func(*rest.Config){
		"server":      func(c *rest.Config) { c.Host = "https://b:6443" },
		"CA":          func(c *rest.Config) { c.CAData = []byte("other") },
		"server name": func(c *rest.Config) { c.ServerName = "b" },
		"insecure":    func(c *rest.Config) { c.Insecure = true },
	} {
		c := rest.CopyConfig(base)
		edit(c)
		if remote.SameEndpoint(base, c) {
			t.Errorf("another %s is the same endpoint", name)
		}
	}
}
