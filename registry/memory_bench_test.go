package registry_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/registry"
)

// BenchmarkIdleManagerMemory spawns 50 remote managers against one remote API
// server, each watching ConfigMaps in a namespace of its own, and reports the
// resident-memory growth per idle manager. Run with -benchtime=1x.
func BenchmarkIdleManagerMemory(b *testing.B) {
	const managers = 50
	ctx := context.Background()
	for i := range managers {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("idle-%d", i)}}
		if err := env.RemoteClients[0].Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		s := &seen{}
		r, err := registry.New(ctx, registry.Options{
			ManageClient:  env.Client,
			Scheme:        env.Scheme,
			RemoteModules: []fx.Option{mirrorModule(s)},
			Logger:        testLogger(),
		})
		if err != nil {
			b.Fatal(err)
		}
		before := settledRSS()
		for i := range managers {
			name := fmt.Sprintf("idle-%d", i)
			if err := r.Spawn(name, env.Remotes[0].Config, registry.WithNamespaces(name)); err != nil {
				b.Fatal(err)
			}
			if err := r.WithClient(name, func(c client.Client) error {
				return c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(name))
			}); err != nil {
				b.Fatal(err)
			}
		}
		after := settledRSS()
		b.ReportMetric(float64(after-before)/float64(managers)/(1<<20), "MiB/manager")
		b.ReportMetric(float64(after)/(1<<20), "MiB-total")
		stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
		if err := r.Close(stopCtx); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
}

// settledRSS returns VmRSS in bytes after a GC and a short settle.
func settledRSS() int64 {
	time.Sleep(2 * time.Second)
	runtime.GC()
	debug.FreeOSMemory()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
