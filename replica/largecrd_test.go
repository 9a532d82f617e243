package replica_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/netproxy"
)

// largeCRDChart writes a chart whose crds/ holds a CRD of about 1.2 MB (a
// schema description of random text), the size of Chaos Mesh's
// workflownodes CRD, and returns its directory.
func largeCRDChart(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	// Words drawn at random: text that compresses about as well as a real
	// schema's descriptions (Helm keeps the chart gzipped in a Secret of at
	// most 1 MiB; the API server gzips large answers).
	words := strings.Fields("the field of a chaos experiment selects pods by label namespace and mode duration action container network delay loss corrupt bandwidth rate limit jitter correlation target direction source external interface device volume path percent errno method time offset clock stress memory cpu workers load size scheduler cron history limit concurrency policy status condition phase record injected recovered paused")
	var desc strings.Builder
	b := make([]byte, 2)
	for desc.Len() < 1200<<10 {
		_, _ = rand.Read(b)
		desc.WriteString(words[int(b[0])%len(words)])
		desc.WriteByte(' ')
	}
	crd := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: larges.large.clustershard.io
spec:
  group: large.clustershard.io
  names: {kind: Large, listKind: LargeList, plural: larges, singular: large}
  scope: Namespaced
  versions:
    - name: v1alpha1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              description: %q
`, desc.String())
	for name, content := range map[string]string{
		"Chart.yaml":      "apiVersion: v2\nname: large-crd\nversion: 0.1.0\n",
		"crds/large.yaml": crd,
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestHelmLargeCRDOverSlowLink installs a chart with a 1.2 MB CRD into a
// remote whose answers reach the replica at 100 KB/s, so that creating the
// CRD (and the release's Secret) takes longer than the 2 s renew deadline: the write runs while the
// replica owns the cluster, and the release installs at revision 1 with no
// failed attempt and no Warning event.
func TestHelmLargeCRDOverSlowLink(t *testing.T) {
	ctx := t.Context()
	u, err := url.Parse(env.Remotes[1].Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := netproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = proxy.Close() }()
	proxy.SetDownloadRate(100 << 10)
	cfg := rest.CopyConfig(env.Remotes[1].Config)
	cfg.Host = "https://" + proxy.Addr()
	kc, err := localcluster.KubeConfigFromREST("remote-1-slow", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // Helm leaves the CRDs of crds/ behind
		crd := &apiextensionsv1.CustomResourceDefinition{}
		crd.Name = "larges.large.clustershard.io"
		_ = env.RemoteClients[1].Delete(context.Background(), crd)
	})
	startReplica(t, "large")
	helmClusterWith(t, "largecrd", kc, &v1alpha1.HelmInstall{Chart: largeCRDChart(t), ReleaseName: "large", Namespace: "large"})
	start := time.Now()
	installedWith(t, "largecrd", 1)
	t.Logf("installed in %v", time.Since(start).Round(100*time.Millisecond))

	var crd apiextensionsv1.CustomResourceDefinition
	if err := env.RemoteClients[1].Get(ctx, client.ObjectKey{Name: "larges.large.clustershard.io"}, &crd); err != nil {
		t.Fatalf("the large CRD is not in the remote: %v", err)
	}
	if h := history(t, 1, "large", "large"); len(h) != 1 {
		t.Fatalf("release history %d revisions, want 1 (no failed attempt)", len(h))
	}
	var events corev1.EventList
	if err := env.Client.List(ctx, &events, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Name == "largecrd" && e.Type == corev1.EventTypeWarning {
			t.Fatalf("Warning event: %s: %s", e.Reason, e.Message)
		}
	}
}
