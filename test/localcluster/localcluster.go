package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options configure a local control plane.
type Options struct {
	// Remotes is how many remote API servers to start.
	Remotes int
	// BinDir holds kube-apiserver and etcd; empty means FindBinDir.
	BinDir string
	// CRDDirs and CRDs are installed into the management cluster.
	CRDDirs []string
	CRDs    []*apiextensionsv1.CustomResourceDefinition
	// RemoteCRDDirs are installed into every remote cluster (usually none:
	// the controllers install what spec.install asks for).
	RemoteCRDDirs []string
	// Output receives the API servers' and etcd's output; nil discards it.
	Output io.Writer
	// StartTimeout bounds the start of each process; default 60s.
	StartTimeout time.Duration
	// AuditDir, when set, makes every remote API server write an audit log
	// of all write requests (verb, object, user agent, timestamps) to
	// AuditDir/<name>.audit.log, kept across its restarts.
	AuditDir string
}

// Cluster is one running API server with an admin identity.
type Cluster struct {
	// Name identifies the cluster: "management" or "remote-N".
	Name string
	// Config is a system:masters rest.Config for the cluster.
	Config *rest.Config
	// KubeConfig is Config as kubeconfig file content.
	KubeConfig []byte

	plane  *envtest.ControlPlane // remotes only: the API server without etcd
	mu     sync.Mutex
	up     bool
	crdDir []string
}

// ControlPlane is a running management cluster plus remotes.
type ControlPlane struct {
	// Management is the management cluster.
	Management *Cluster
	// Remotes are the remote clusters, in order.
	Remotes []*Cluster

	env  *envtest.Environment
	opts Options
	// managementCerts is the management API server's certificate
	// directory, fixed so a restart keeps its CA and the admin credentials.
	managementCerts string
}

// Start starts the management cluster, then the remotes in parallel. On error
// everything already started is stopped.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, retErr error) {
	if opts.BinDir == "" {
		dir, err := FindBinDir()
		if err != nil {
			return nil, err
		}
		opts.BinDir = dir
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	reapOrphans(opts.BinDir)
	cp := &ControlPlane{opts: opts}
	cp.env = &envtest.Environment{
		BinaryAssetsDirectory:    opts.BinDir,
		CRDDirectoryPaths:        opts.CRDDirs,
		CRDs:                     opts.CRDs,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: opts.StartTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	api := cp.env.ControlPlane.GetAPIServer()
	if opts.Output != nil {
		api.Out, api.Err = opts.Output, opts.Output
		cp.env.ControlPlane.Etcd = &envtest.Etcd{Out: opts.Output, Err: opts.Output}
	}
	certs, err := os.MkdirTemp("", "clustershard-management-")
	if err != nil {
		return nil, err
	}
	api.CertDir, cp.managementCerts = certs, certs
	cfg, err := cp.env.Start()
	if err != nil {
		_ = os.RemoveAll(certs)
		return nil, fmt.Errorf("start management control plane: %w", err)
	}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, cp.Stop())
		}
	}()
	kc, err := KubeConfigFromREST("management", cfg)
	if err != nil {
		return nil, err
	}
	cp.Management = &Cluster{Name: "management", Config: cfg, KubeConfig: kc, up: true}

	cp.Remotes = make([]*Cluster, opts.Remotes)
	g, gctx := errgroup.WithContext(ctx)
	for i := range cp.Remotes {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			c, err := cp.newRemote(i)
			if err != nil {
				return err
			}
			cp.Remotes[i] = c
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	recordChildren(opts.BinDir)
	return cp, nil
}

// newRemote starts remote API server i on the shared etcd under its own prefix.
func (cp *ControlPlane) newRemote(i int) (*Cluster, error) {
	name := fmt.Sprintf("remote-%d", i)
	certDir, err := os.MkdirTemp("", "clustershard-"+name+"-")
	if err != nil {
		return nil, err
	}
	api := &envtest.APIServer{
		Path:         cp.opts.BinDir + "/kube-apiserver",
		EtcdURL:      cp.env.ControlPlane.Etcd.URL,
		CertDir:      certDir, // kept across restarts so the serving CA stays valid
		StartTimeout: cp.opts.StartTimeout,
		StopTimeout:  30 * time.Second,
		Out:          cp.opts.Output,
		Err:          cp.opts.Output,
	}
	api.Configure().Set("etcd-prefix", "/"+name)
	if cp.opts.AuditDir != "" {
		policy := filepath.Join(cp.opts.AuditDir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(writeAuditPolicy), 0o600); err != nil {
			return nil, err
		}
		api.Configure().Set("audit-policy-file", policy).
			Set("audit-log-path", AuditLogPath(cp.opts.AuditDir, name)).
			Set("audit-log-format", "json")
	}
	c := &Cluster{Name: name, plane: &envtest.ControlPlane{APIServer: api}, crdDir: cp.opts.RemoteCRDDirs}
	if err := api.Start(); err != nil {
		_ = os.RemoveAll(certDir)
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c.up = true
	user, err := c.plane.AddUser(envtest.User{Name: "clustershard-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, errors.Join(err, c.stop(true))
	}
	c.Config = user.Config()
	if c.KubeConfig, err = KubeConfigFromREST(name, c.Config); err != nil {
		return nil, errors.Join(err, c.stop(true))
	}
	if len(c.crdDir) > 0 {
		if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{Paths: c.crdDir, ErrorIfPathMissing: true}); err != nil {
			return nil, errors.Join(fmt.Errorf("install CRDs into %s: %w", name, err), c.stop(true))
		}
	}
	return c, nil
}

// writeAuditPolicy records every write request once, when its response is
// complete, at metadata level, and the reads of single objects of the
// example API (a drill tells from them what a replica is about to write);
// nothing else.
const writeAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: Metadata
  verbs: ["get"]
  resources: [{group: example.clustershard.io}]
- level: None
`

// AuditLogPath is where remote cluster name writes its audit log when
// Options.AuditDir is dir.
func AuditLogPath(dir, name string) string { return filepath.Join(dir, name+".audit.log") }

// AddUser provisions a client-certificate user in the cluster and returns its
// rest.Config and kubeconfig. Only remote clusters support it.
func (c *Cluster) AddUser(name string, groups ...string) (*rest.Config, []byte, error) {
	if c.plane == nil {
		return nil, nil, errors.New("AddUser is only supported on remote clusters")
	}
	user, err := c.plane.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, nil, err
	}
	kc, err := KubeConfigFromREST(c.Name, user.Config())
	return user.Config(), kc, err
}

// StopAPIServer stops a remote API server, keeping its data, certificates and
// port so that StartAPIServer brings the same cluster back.
func (c *Cluster) StopAPIServer() error { return c.stop(false) }

// KillAPIServer kills a remote API server with SIGKILL, as a crash or a lost
// machine would, keeping its data, certificates and port for StartAPIServer.
func (c *Cluster) KillAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.plane == nil {
		return errors.New("only remote API servers can be killed")
	}
	if !c.up {
		return nil
	}
	for _, pid := range childProcs("kube-apiserver", "--cert-dir="+c.plane.APIServer.CertDir) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill %s: %w", c.Name, err)
		}
	}
	// The process has exited (or is exiting): Stop reaps it without waiting.
	err := c.plane.APIServer.Stop()
	c.up = false
	return err
}

// StartAPIServer restarts a remote API server stopped by StopAPIServer or
// KillAPIServer.
func (c *Cluster) StartAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.plane == nil {
		return errors.New("only remote API servers can be restarted")
	}
	if c.up {
		return nil
	}
	if err := c.plane.APIServer.Start(); err != nil {
		return fmt.Errorf("restart %s: %w", c.Name, err)
	}
	c.up = true
	recordChildren(filepath.Dir(c.plane.APIServer.Path))
	return nil
}

// RestartManagementAPIServer kills the management kube-apiserver (SIGKILL,
// as a crashed API server pod) and starts it again on the same port with the
// same certificates; etcd and the remotes keep running.
func (cp *ControlPlane) RestartManagementAPIServer() error {
	api := cp.env.ControlPlane.GetAPIServer()
	for _, pid := range childProcs("kube-apiserver", "--cert-dir="+cp.managementCerts) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill the management API server: %w", err)
		}
	}
	if err := api.Stop(); err != nil { // reaps the killed process
		return fmt.Errorf("stop the management API server: %w", err)
	}
	if err := api.Start(); err != nil {
		return fmt.Errorf("restart the management API server: %w", err)
	}
	recordChildren(cp.opts.BinDir)
	return nil
}

func (c *Cluster) stop(removeData bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	if c.up {
		if err = c.plane.APIServer.Stop(); err != nil {
			// Still running past its stop timeout: kill it, so a restart
			// finds its port free.
			for _, pid := range childProcs("kube-apiserver", "--cert-dir="+c.plane.APIServer.CertDir) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			err = fmt.Errorf("%s did not exit after SIGTERM within its stop timeout and was killed: %w", c.Name, err)
		}
		c.up = false
	}
	if removeData {
		err = errors.Join(err, os.RemoveAll(c.plane.APIServer.CertDir))
	}
	return err
}

// Stop stops the remotes, then the management cluster and etcd, and removes
// their temporary files. It is safe to call more than once.
func (cp *ControlPlane) Stop() error {
	var errs []error
	for _, r := range cp.Remotes {
		if r != nil {
			errs = append(errs, r.stop(true))
		}
	}
	cp.Remotes = nil
	if cp.env != nil {
		errs = append(errs, cp.env.Stop())
		cp.env = nil
	}
	if cp.managementCerts != "" {
		errs = append(errs, os.RemoveAll(cp.managementCerts))
		cp.managementCerts = ""
	}
	forgetChildren()
	return errors.Join(errs...)
}
