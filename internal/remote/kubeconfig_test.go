package remote_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remote"
)

const secretToken = "s3cr3t-t0ken-do-not-log"

const base = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
    insecure-skip-tls-verify: true
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
users:
- name: u
  user:
`

func TestParse(t *testing.T) {
	cases := []struct {
		name      string
		content   string
		allowExec bool
		reason    string // empty: valid
	}{
		{"token", base + "    token: " + secretToken + "\n", false, ""},
		{"exec rejected", base + "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/evil, interactiveMode: Never}\n", false, v1alpha1.ReasonKubeConfigExecNotAllowed},
		{"exec allowed", base + "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/helper, interactiveMode: Never}\n", true, ""},
		{"auth provider rejected", base + "    auth-provider: {name: oidc, config: {id-token: " + secretToken + "}}\n", false, v1alpha1.ReasonKubeConfigExecNotAllowed},
		{"empty", "", false, v1alpha1.ReasonKubeConfigMalformed},
		{"garbage", "{not: [yaml: " + secretToken, false, v1alpha1.ReasonKubeConfigMalformed},
		{"binary", "\x00\x01\x02" + secretToken, false, v1alpha1.ReasonKubeConfigMalformed},
		{"no context", strings.Replace(base, "current-context: x", "current-context: nope", 1) + "    token: t\n", false, v1alpha1.ReasonKubeConfigIncomplete},
		{"no server", strings.Replace(base, "server: https://127.0.0.1:6443", "server: \"\"", 1) + "    token: t\n", false, v1alpha1.ReasonKubeConfigIncomplete},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := remote.Parse([]byte(tc.content), remote.Options{AllowExec: tc.allowExec, QPS: 7, Burst: 9})
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("valid kubeconfig rejected: %v", err)
				}
				if cfg.QPS != 7 || cfg.Burst != 9 || cfg.Host != "https://127.0.0.1:6443" {
					t.Fatalf("options not applied: %+v", cfg)
				}
				return
			}
			var kerr *remote.Error
			if !errors.As(err, &kerr) || kerr.Reason != tc.reason || !errors.Is(err, remote.ErrInvalid) {
				t.Fatalf("want reason %s, got %v", tc.reason, err)
			}
			if strings.Contains(err.Error(), secretToken) {
				t.Fatalf("secret material in the error: %q", err)
			}
		})
	}
}

func TestHashIsStableAndChanges(t *testing.T) {
	a, b := remote.Hash([]byte("one")), remote.Hash([]byte("two"))
	if a != remote.Hash([]byte("one")) || a == b || len(a) != 16 {
		t.Fatalf("hash: %q %q", a, b)
	}
}
