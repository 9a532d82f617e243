package testenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/tools/fleet"
)

// ControllerNamespace is where the harness writes the remotes' kubeconfig Secrets.
const ControllerNamespace = "clustershard-system"

// Options configure the environment of a test package.
type Options struct {
	// Remotes is how many remote API servers to start.
	Remotes int
	// RemoteCRDs also installs the CRDs into every remote.
	RemoteCRDs bool
	// Verbose attaches the API servers' output to stderr.
	Verbose bool
}

// Env is the running environment shared by the tests of one package.
type Env struct {
	*localcluster.ControlPlane
	// Scheme knows the built-in kinds, the clustershard API and the example kind.
	Scheme *runtime.Scheme
	// Client is an admin client of the management cluster.
	Client client.Client
	// RemoteClients are admin clients of the remotes, in order.
	RemoteClients []client.Client
}

// NewScheme returns the scheme of the binary with the example kind.
func NewScheme() *runtime.Scheme { return fleet.Scheme() }

// SecretName is the name of the kubeconfig Secret the harness writes for a remote.
func SecretName(remote string) string { return remote + "-kubeconfig" }

// CRDDirs returns the CRD folders of the module: the clustershard API and the example kind.
func CRDDirs() ([]string, error) {
	root, err := localcluster.ModuleRoot()
	if err != nil {
		return nil, err
	}
	return []string{filepath.Join(root, "deploy", "crds"), filepath.Join(root, "deploy", "examples", "crds")}, nil
}

// Start starts an environment; the caller must Stop it.
func Start(ctx context.Context, opts Options) (*Env, error) {
	crds, err := CRDDirs()
	if err != nil {
		return nil, err
	}
	lo := localcluster.Options{Remotes: opts.Remotes, CRDDirs: crds}
	if opts.RemoteCRDs {
		lo.RemoteCRDDirs = crds
	}
	if opts.Verbose {
		lo.Output = os.Stderr
	}
	cp, err := localcluster.Start(ctx, lo)
	if err != nil {
		return nil, err
	}
	env := &Env{ControlPlane: cp, Scheme: NewScheme()}
	if err := env.init(ctx); err != nil {
		return nil, errors.Join(err, cp.Stop())
	}
	return env, nil
}

func (e *Env) init(ctx context.Context) error {
	var err error
	if e.Client, err = client.New(e.Management.Config, client.Options{Scheme: e.Scheme}); err != nil {
		return err
	}
	for _, r := range e.Remotes {
		rc, err := client.New(r.Config, client.Options{Scheme: e.Scheme})
		if err != nil {
			return err
		}
		e.RemoteClients = append(e.RemoteClients, rc)
		if err := localcluster.WriteKubeConfigSecret(ctx, e.Client, ControllerNamespace, SecretName(r.Name), localcluster.DefaultSecretKey, r.KubeConfig); err != nil {
			return err
		}
	}
	return nil
}

// RESTConfigFromKubeConfig parses kubeconfig content into a rest.Config.
func RESTConfigFromKubeConfig(kubeconfig []byte) (*rest.Config, error) {
	return clientcmd.RESTConfigFromKubeConfig(kubeconfig)
}

// Run is the body of a package's TestMain: it starts the environment, stores it
// in *env, runs the tests and stops everything, also on SIGINT or SIGTERM. It
// returns the exit code for os.Exit. Under -fuzz it starts nothing (the fuzz
// targets are pure): fuzz with -run '^$'.
func Run(m *testing.M, opts Options, env **Env) int {
	if !opts.Verbose {
		ctrl.SetLogger(logr.Discard())
	}
	if fuzzing() {
		// Fuzz targets are pure; every fuzz worker process runs TestMain
		// too, and must not start a control plane each.
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	e, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	*env = e

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(os.Stderr, "testenv: %v: stopping the control plane\n", s)
			_ = e.Stop()
			os.Exit(130)
		case <-done:
		}
	}()

	code := m.Run()
	close(done)
	signal.Stop(sigs)
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stop: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// fuzzing tells whether the test binary runs a fuzz target (-test.fuzz, or
// as one of its workers) rather than tests.
func fuzzing() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	fuzz, worker := flag.Lookup("test.fuzz"), flag.Lookup("test.fuzzworker")
	return (fuzz != nil && fuzz.Value.String() != "") || (worker != nil && worker.Value.String() == "true")
}
