package remote_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remote"
)

// reasons are the reasons a refused kubeconfig may carry.
var reasons = map[string]bool{
	v1alpha1.ReasonKubeConfigMalformed:      true,
	v1alpha1.ReasonKubeConfigIncomplete:     true,
	v1alpha1.ReasonKubeConfigExecNotAllowed: true,
}

// checkRefusal fails unless err is a *remote.Error with a known reason and a
// bounded message carrying none of the secrets.
func checkRefusal(t *testing.T, err error, secrets ...string) {
	t.Helper()
	var kerr *remote.Error
	if !errors.As(err, &kerr) || !reasons[kerr.Reason] || !errors.Is(err, remote.ErrInvalid) {
		t.Fatalf("refusal %T %v: want a *remote.Error with a known reason", err, err)
	}
	if len(kerr.Message) > 1024 {
		t.Fatalf("refusal message of %d bytes", len(kerr.Message))
	}
	for _, s := range secrets {
		if len(s) >= 6 && strings.Contains(kerr.Message, s) {
			t.Fatalf("refusal %q carries secret material %q", kerr.Message, s)
		}
	}
}

// Arbitrary bytes as a kubeconfig: never a panic; a refusal is a
// *remote.Error with a known reason, and a config has a server.
func FuzzParse(f *testing.F) {
	f.Add([]byte(base + "    token: " + secretToken + "\n"))
	f.Add([]byte(base + "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/evil}\n"))
	f.Add([]byte(base + "    auth-provider: {name: oidc, config: {id-token: " + secretToken + "}}\n"))
	f.Add([]byte("{not: [yaml: " + secretToken))
	f.Add([]byte("\x00\x01"))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Config","clusters":[{"name":"c","cluster":{"server":"https://[::1]:1"}}],"contexts":[{"name":"x","context":{"cluster":"c","user":"u"}}],"current-context":"x","users":[{"name":"u","user":{"password":"p4ssw0rd!","username":"me"}}]}`))
	f.Fuzz(func(t *testing.T, content []byte) {
		cfg, err := remote.Parse(content, remote.Options{})
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if cfg.Host == "" || cfg.ExecProvider != nil || cfg.AuthProvider != nil {
			t.Fatalf("accepted a config with host %q, exec %v, auth-provider %v", cfg.Host, cfg.ExecProvider, cfg.AuthProvider)
		}
	})
}

// A kubeconfig carrying a token, a password and a client key, cut or
// corrupted anywhere and with exec or auth-provider credentials: no refusal
// quotes any of the three, exec and auth-provider are always refused.
func FuzzParseKeepsSecrets(f *testing.F) {
	f.Add(secretToken, "p4ssw0rd-zz", "a2V5LWRhdGEtc2VjcmV0", uint8(0), uint16(0), "")
	f.Add(secretToken, "p4ssw0rd-zz", "a2V5LWRhdGEtc2VjcmV0", uint8(1), uint16(40), "]")
	f.Add(secretToken, "hunter22", "LS0tLS1CRUdJTg==", uint8(2), uint16(200), "{\"")
	f.Add("tok'en\"with`quotes", "pa:ss", "!!binary", uint8(3), uint16(330), "\t")
	f.Fuzz(func(t *testing.T, token, password, key string, mode uint8, cut uint16, junk string) {
		user := "    token: " + token + "\n    password: " + password + "\n    username: me\n    client-key-data: " + key + "\n"
		switch mode % 4 {
		case 1:
			user += "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/helper}\n"
		case 2:
			user += "    auth-provider: {name: oidc, config: {id-token: " + token + "}}\n"
		}
		content := base + user
		if mode%4 == 3 || junk != "" {
			at := int(cut) % (len(content) + 1)
			content = content[:at] + junk + content[at:]
		}
		cfg, err := remote.Parse([]byte(content), remote.Options{})
		if err == nil {
			if cfg.ExecProvider != nil || cfg.AuthProvider != nil {
				t.Fatal("exec or auth-provider credentials accepted without --allow-exec-kubeconfig")
			}
			return
		}
		// A secret that is also part of the kubeconfig's own words (a
		// field name, the server) may appear; only check the others.
		var secrets []string
		for _, s := range []string{token, password, key} {
			if !strings.Contains(base, s) && !strings.Contains(user, s+":") && !strings.Contains("token password username client-key-data exec auth-provider oidc config id-token", s) {
				secrets = append(secrets, s)
			}
		}
		checkRefusal(t, err, secrets...)
	})
}
