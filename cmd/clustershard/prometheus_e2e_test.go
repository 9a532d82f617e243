//go:build e2e

package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/tools/dashboard"
)

// A real Prometheus server (built into bin/ by `make prometheus`) scrapes three
// replica processes every second and evaluates the shipped alert rules.
// During a kill drill its HTTP API answers the dashboard's ownership and
// hand-over queries with values, and ClustershardClustersUnowned goes
// pending, then resolves once the survivors have taken the clusters over.
func TestPrometheusDuringKillDrill(t *testing.T) {
	promBin, err := localcluster.FindTool("prometheus")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	bin := build(t)
	kc := filepath.Join(t.TempDir(), "management.kubeconfig")
	if err := os.WriteFile(kc, env.Management.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	const clusters = 12
	for i := range clusters {
		name := fmt.Sprintf("prom-%02d", i)
		if err := localcluster.WriteKubeConfigSecret(ctx, env.Client, ns, name, "kubeconfig", env.Remotes[i%2].KubeConfig); err != nil {
			t.Fatal(err)
		}
		rc := &v1alpha1.RemoteCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.RemoteClusterSpec{
			KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyReference{Namespace: ns, Name: name, Key: "kubeconfig"}},
		}}
		if err := env.Client.Create(ctx, rc); err != nil {
			t.Fatal(err)
		}
	}
	// A lease of 6 s with a renew deadline of 2 s: a dead replica's clusters
	// are unowned for about 4 s, several scrape and evaluation intervals.
	procs, addrs := map[string]*proc{}, map[string]string{}
	for i := range 3 {
		id := "prom-" + strconv.Itoa(i)
		addrs[id] = freeAddr(t)
		procs[id] = start(t, bin, kc, id, "--health-probe-bind-address", "0", "--metrics-bind-address", addrs[id],
			"--lease-duration", "6s", "--renew-deadline", "2s")
	}
	api := startPrometheus(t, promBin, addrs)
	poll(t, 90*time.Second, "Prometheus to see every cluster owned", func() bool {
		v, ok := api.scalar(t, `sum(clustershard_owned_clusters)`)
		return ok && v == clusters
	})

	victim := "prom-1"
	killedAt := time.Now()
	if err := procs[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var pendingAt, resolvedAt time.Duration
	poll(t, 60*time.Second, "ClustershardClustersUnowned pending, then resolved", func() bool {
		state := api.alertState(t, "ClustershardClustersUnowned")
		switch {
		case state == "firing":
			t.Fatalf("ClustershardClustersUnowned fired: a take-over took longer than its bound")
		case state == "pending" && pendingAt == 0:
			pendingAt = time.Since(killedAt)
		case state == "" && pendingAt != 0:
			resolvedAt = time.Since(killedAt)
			return true
		}
		return false
	})
	t.Logf("ClustershardClustersUnowned: pending %v after the kill, resolved %v after", pendingAt.Round(100*time.Millisecond), resolvedAt.Round(100*time.Millisecond))
	poll(t, 30*time.Second, "Prometheus to see every cluster owned again", func() bool {
		v, ok := api.scalar(t, `sum(clustershard_owned_clusters{pod!="`+victim+`"})`)
		return ok && v == clusters
	})

	// The dashboard's ownership and hand-over queries answer with values.
	queries, err := dashboard.Queries()
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	for _, q := range queries {
		if q.Row != "Ownership" && q.Row != "Hand-over" && q.Row != "Fleet overview" {
			continue
		}
		asked++
		poll(t, 20*time.Second, fmt.Sprintf("a value for %s / %s: %s", q.Row, q.Panel, q.Expr), func() bool {
			return api.hasValue(t, q.Expr)
		})
	}
	t.Logf("%d dashboard queries of the fleet, ownership and hand-over rows answered with values", asked)
	if p99, ok := api.scalar(t, `histogram_quantile(0.99, sum by (le) (rate(clustershard_cluster_unmanaged_duration_seconds_bucket[5m])))`); ok {
		t.Logf("time without manager p99 as Prometheus computes it: %.2fs", p99)
	}
}

// promAPI queries a Prometheus server's HTTP API.
type promAPI struct{ base string }

type promResponse struct {
	Status string `json:"status"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	} `json:"data"`
	Error string `json:"error"`
}

func (p promAPI) get(t *testing.T, path string, q url.Values) promResponse {
	t.Helper()
	resp, err := http.Get(p.base + path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var r promResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if r.Status != "success" {
		t.Fatalf("%s %v: %s", path, q, r.Error)
	}
	return r
}

// values returns the sample values of an instant query, NaN dropped.
func (p promAPI) values(t *testing.T, expr string) []float64 {
	t.Helper()
	r := p.get(t, "/api/v1/query", url.Values{"query": {expr}})
	var out []float64
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err == nil && !math.IsNaN(v) {
			out = append(out, v)
		}
	}
	return out
}

func (p promAPI) hasValue(t *testing.T, expr string) bool { return len(p.values(t, expr)) > 0 }

func (p promAPI) scalar(t *testing.T, expr string) (float64, bool) {
	v := p.values(t, expr)
	if len(v) != 1 {
		return 0, false
	}
	return v[0], true
}

// alertState returns "pending", "firing" or "" for an alert.
func (p promAPI) alertState(t *testing.T, name string) string {
	t.Helper()
	state := ""
	for _, a := range p.get(t, "/api/v1/alerts", nil).Data.Alerts {
		if a.Labels["alertname"] == name && (state == "" || a.State == "firing") {
			state = a.State
		}
	}
	return state
}

// startPrometheus runs Prometheus on loopback scraping the replicas every
// second (job clustershard-metrics, a pod label per target) and evaluating
// the shipped rules file every second.
func startPrometheus(t *testing.T, bin string, targets map[string]string) promAPI {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs("../../deploy/monitoring/prometheus/clustershard.rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var static strings.Builder
	for pod, addr := range targets {
		fmt.Fprintf(&static, "      - targets: [%q]\n        labels: {pod: %q}\n", addr, pod)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: clustershard-metrics
    static_configs:
%s`, rules, static.String())
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	base := "http://" + addr
	poll(t, 30*time.Second, "Prometheus ready", func() bool {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, base+"/-/ready", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return promAPI{base: base}
}
