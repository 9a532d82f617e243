package registry_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"go.uber.org/fx"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/clustershard/clustershard/registry"
)

const (
	mirrorLabel     = "registry-test/mirror"
	mirrorNamespace = "mirror"
)

// seen records what each remote fx app was given, per cluster name.
type seen struct {
	mu   sync.Mutex
	apps map[string][]moduleParams
}

func (s *seen) last(name string) (moduleParams, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	apps := s.apps[name]
	if len(apps) == 0 {
		return moduleParams{}, 0
	}
	return apps[len(apps)-1], len(apps)
}

// moduleParams is what the test remote module asks fx for, following the
// seed's five steps: the unnamed remote client, plus the named management
// client and cluster name.
type moduleParams struct {
	fx.In

	Manager     manager.Manager
	Remote      client.Client
	Manage      client.Client `name:"manage-client"`
	ClusterName string        `name:"cluster-name"`
	Config      *rest.Config
}

// mirrorModule is a remote module: it records its params and registers a
// controller that copies labelled remote ConfigMaps into the management
// cluster, stamped with the cluster name it was given.
func mirrorModule(s *seen) fx.Option {
	return fx.Module("mirror-test", fx.Invoke(func(p moduleParams) error {
		s.mu.Lock()
		if s.apps == nil {
			s.apps = map[string][]moduleParams{}
		}
		s.apps[p.ClusterName] = append(s.apps[p.ClusterName], p)
		s.mu.Unlock()
		return ctrl.NewControllerManagedBy(p.Manager).
			Named(registry.ControllerName(p.ClusterName, "mirror")).
			For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				return o.GetLabels()[mirrorLabel] == "true"
			}))).
			Complete(&mirror{p: p})
	}))
}

type mirror struct{ p moduleParams }

func (m *mirror) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cm corev1.ConfigMap
	if err := m.p.Remote.Get(ctx, req.NamespacedName, &cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	out := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: mirrorNamespace, Name: m.p.ClusterName + "." + cm.Name},
		Data:       map[string]string{"cluster": m.p.ClusterName, "from": m.p.Config.Host},
	}
	if err := m.p.Manage.Create(ctx, out); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// newRegistry returns a registry over the test environment, closed at cleanup.
func newRegistry(t *testing.T, s *seen, mutate ...func(*registry.Options)) *registry.Registry {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	opts := registry.Options{
		ManageClient:  env.Client,
		Scheme:        env.Scheme,
		RemoteModules: []fx.Option{mirrorModule(s)},
		Logger:        testLogger(),
		ProbeInterval: 200 * time.Millisecond,
		ProbeTimeout:  time.Second,
	}
	for _, m := range mutate {
		m(&opts)
	}
	r, err := registry.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopCtx, stop := context.WithTimeout(context.Background(), 30*time.Second)
		defer stop()
		if err := r.Close(stopCtx); err != nil {
			t.Errorf("close registry: %v", err)
		}
		cancel()
	})
	return r
}

// testLogger logs to stderr with -v and nowhere otherwise. It is not bound to
// a *testing.T because remote managers may log briefly after a test ends.
func testLogger() logr.Logger {
	if !testing.Verbose() {
		return logr.Discard()
	}
	return zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr))
}

// eventually polls cond every 100ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

func ensureNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func configMap(ns, name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

// jsonDecode decodes a request's JSON body into v.
func jsonDecode(r *http.Request, v any) error { return json.NewDecoder(r.Body).Decode(v) }
