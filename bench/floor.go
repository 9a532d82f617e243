package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Floor is the cost of the simplest remote manager there is, measured in
// the same run as the replicas: a bare controller-runtime manager caching
// one kind (ConfigMaps) in a namespace of its own, with one controller that
// does nothing, started and synced n at a time in the harness's process.
type Floor struct {
	Managers int `json:"managers"`
	// Seconds until all were started and synced.
	Seconds float64 `json:"seconds"`
	// CPUPerManagerMs is the harness's CPU per manager (client side, as a
	// replica's CPU per spawn is); APIPerManagerMs the API servers' and
	// etcd's.
	CPUPerManagerMs   float64 `json:"cpuPerManagerMs"`
	APIPerManagerMs   float64 `json:"apiCPUPerManagerMs"`
	GoroutinesPerMgr  float64 `json:"goroutinesPerManager"`
	HeapMiBPerManager float64 `json:"heapMiBPerManager"`
}

// bareFloor starts n bare managers against the API server of cfg and
// measures them, then stops them.
func bareFloor(ctx context.Context, cfg *rest.Config, n int) (*Floor, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	for i := range n {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("floor-%d", i)}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goBefore := runtime.NumGoroutine()
	cpuBefore := cpuSeconds()
	start := time.Now()
	mctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	errs := make(chan error, n)
	ready := make(chan struct{}, n)
	for i := range n {
		c := rest.CopyConfig(cfg)
		c.QPS, c.Burst = 20, 40
		mgr, err := manager.New(c, manager.Options{
			Scheme:                 clientgoscheme.Scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
			Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{fmt.Sprintf("floor-%d", i): {}}},
		})
		if err != nil {
			return nil, err
		}
		if err := builder.ControllerManagedBy(mgr).Named(fmt.Sprintf("floor-%d", i)).For(&corev1.ConfigMap{}).
			Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })); err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := mgr.Start(mctx); err != nil {
				errs <- err
			}
		}()
		go func() {
			select {
			case <-mgr.Elected():
				ready <- struct{}{}
			case <-mctx.Done():
			}
		}()
	}
	for range n {
		select {
		case <-ready:
		case err := <-errs:
			return nil, err
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Minute):
			return nil, fmt.Errorf("%d bare managers not synced within 5 minutes", n)
		}
	}
	f := &Floor{Managers: n, Seconds: round(time.Since(start).Seconds(), 3)}
	cpu := cpuSince(cpuBefore)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	f.CPUPerManagerMs = round(1000*cpu[classHarness]/float64(n), 2)
	f.APIPerManagerMs = round(1000*(cpu[classAPIServers]+cpu[classEtcd])/float64(n), 2)
	f.GoroutinesPerMgr = round(float64(runtime.NumGoroutine()-goBefore)/float64(n), 1)
	f.HeapMiBPerManager = round(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/mib/float64(n), 3)
	return f, nil
}
