package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/cmd/clustershard/status"
	"github.com/clustershard/clustershard/deploy"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/tools/fleet"
)

// Namespace is where the demo keeps Leases and kubeconfig Secrets.
const Namespace = "clustershard-system"

// Options size and time the demo.
type Options struct {
	Remotes           int
	ClustersPerRemote int
	Replicas          int
	ObjectsPerCluster int
	Refresh           time.Duration
	// Duration ends the demo after the scenario plus this long; 0 waits for Ctrl-C.
	Duration      time.Duration
	LeaseDuration time.Duration
	// Binary is the clustershard binary the replicas run.
	Binary string
	Out    io.Writer
}

// AddFlags registers the demo's flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Remotes, "remotes", 3, "Remote API servers to start.")
	fs.IntVar(&o.ClustersPerRemote, "clusters-per-remote", 10, "RemoteClusters per remote API server (each its own Secret and namespace scope).")
	fs.IntVar(&o.Replicas, "replicas", 3, "Replica processes.")
	fs.IntVar(&o.ObjectsPerCluster, "objects-per-cluster", 2, "Replicated ExampleChaos objects per RemoteCluster.")
	fs.DurationVar(&o.Refresh, "refresh", 2*time.Second, "Refresh period of the ownership table.")
	fs.DurationVar(&o.Duration, "duration", 0, "Stop this long after the scenario (0: run until Ctrl-C).")
	fs.DurationVar(&o.LeaseDuration, "lease-duration", 6*time.Second, "Membership lease duration of the replicas (short, so moves are quick to watch).")
}

func (o *Options) validate() error {
	if o.Remotes < 1 || o.ClustersPerRemote < 1 || o.Replicas < 2 || o.ObjectsPerCluster < 0 || o.Refresh <= 0 || o.LeaseDuration < 3*time.Second {
		return errors.New("demo needs --remotes ≥ 1, --clusters-per-remote ≥ 1, --replicas ≥ 2, --objects-per-cluster ≥ 0, --refresh > 0, --lease-duration ≥ 3s")
	}
	if o.Binary == "" {
		return errors.New("demo needs the clustershard binary the replicas run")
	}
	return nil
}

// demo is one run.
type demo struct {
	o        Options
	out      io.Writer
	dir      string
	cp       *localcluster.ControlPlane
	c        client.Client
	kcPath   string
	last     *status.Report // the previous refresh's, to confirm warnings
	replicas map[int]*exec.Cmd
	exited   map[int]chan struct{}
	started  time.Time
	// footer is printed under the table when the screen is redrawn, so
	// the mirroring walk-through stays in view on a terminal.
	footer string
}

// Run runs the demo until ctx ends, Ctrl-C, or Duration after the scenario.
func Run(ctx context.Context, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{o: o, out: o.Out, replicas: map[int]*exec.Cmd{}, exited: map[int]chan struct{}{}, started: time.Now()}
	err := d.run(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return errors.Join(err, d.cleanup())
}

func (d *demo) step(what string, f func() error) error {
	fmt.Fprintf(d.out, "==> %s...\n", what)
	start := time.Now()
	if err := f(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	fmt.Fprintf(d.out, "    done in %v\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

func (d *demo) run(ctx context.Context) error {
	var err error
	if d.dir, err = os.MkdirTemp("", "clustershard-demo-"); err != nil {
		return err
	}
	crds, err := deploy.CRDs(true)
	if err != nil {
		return err
	}
	if err := d.step(fmt.Sprintf("Starting a management kube-apiserver and %d remote ones (etcd shared, one prefix each)", d.o.Remotes), func() error {
		d.cp, err = localcluster.Start(ctx, localcluster.Options{Remotes: d.o.Remotes, CRDs: crds})
		return err
	}); err != nil {
		return err
	}
	d.kcPath = filepath.Join(d.dir, "management.kubeconfig")
	if err := os.WriteFile(d.kcPath, d.cp.Management.KubeConfig, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "    kubectl --kubeconfig %s get remoteclusters.clustershard.io\n", d.kcPath)
	if d.c, err = client.New(d.cp.Management.Config, client.Options{Scheme: fleet.Scheme()}); err != nil {
		return err
	}
	total := d.o.Remotes * d.o.ClustersPerRemote
	if err := d.step(fmt.Sprintf("Creating %d RemoteClusters with their kubeconfig Secrets and %d replicated objects", total, total*d.o.ObjectsPerCluster), func() error {
		return d.createClusters(ctx)
	}); err != nil {
		return err
	}
	if err := d.step(fmt.Sprintf("Starting %d replica processes (logs in %s)", d.o.Replicas, d.dir), func() error {
		for i := range d.o.Replicas {
			if err := d.startReplica(i); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}

	fmt.Fprintln(d.out, "==> Waiting until every cluster is owned and Ready")
	if err := d.watch(ctx, func(r *status.Report) bool { return allReady(r, total) }); err != nil {
		return err
	}
	first := "fleet-0-00"
	if err := d.step("A PodChaos-shaped object (StrictChaos: no status subresource, like Chaos Mesh's kinds) copied to "+first+" and its remote status mirrored back", func() error {
		var buf bytes.Buffer
		out := d.out
		d.out = io.MultiWriter(out, &buf)
		defer func() { d.out, d.footer = out, "\n"+buf.String() }()
		return d.showMirroring(ctx, first, "demo-"+first, 0)
	}); err != nil {
		return err
	}
	victim := 1
	fmt.Fprintf(d.out, "==> Killing replica-%d with SIGKILL: its clusters move once its membership expires (%v)\n", victim, d.o.LeaseDuration)
	killed := time.Now()
	d.kill(victim)
	if err := d.watch(ctx, func(r *status.Report) bool { return allReady(r, total) && owns(r, victim) == 0 && r.Unowned == 0 }); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "    every cluster owned and Ready again %v after the kill\n", time.Since(killed).Round(100*time.Millisecond))
	fmt.Fprintf(d.out, "==> Restarting replica-%d: the ring gives it its share back\n", victim)
	restarted := time.Now()
	if err := d.startReplica(victim); err != nil {
		return err
	}
	if err := d.watch(ctx, func(r *status.Report) bool { return allReady(r, total) && owns(r, victim) > 0 }); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "    rebalanced %v after the restart\n", time.Since(restarted).Round(100*time.Millisecond))
	if err := d.drain(ctx, 0, total); err != nil {
		return err
	}
	if d.o.Duration == 0 {
		fmt.Fprintln(d.out, "==> Running; press Ctrl-C to stop and clean up")
		return d.watch(ctx, func(*status.Report) bool { return false })
	}
	wctx, cancel := context.WithTimeout(ctx, d.o.Duration)
	defer cancel()
	err = d.watch(wctx, func(*status.Report) bool { return false })
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// drain shows an operator's maintenance of replica i: `clustershard drain`
// hands its clusters over by the ordered hand-over while it stays alive, each
// new owner records why, and `clustershard uncordon` gives it its share back.
func (d *demo) drain(ctx context.Context, i, total int) error {
	name := replicaName(i)
	fmt.Fprintf(d.out, "==> clustershard drain %s: its clusters are handed over (stop, then release; no lease to wait out) and it stays out of the ring\n", name)
	start := time.Now()
	out, err := d.cli(ctx, "drain", name, "--timeout", "2m")
	fmt.Fprint(d.out, indent(out))
	if err != nil {
		return fmt.Errorf("clustershard drain %s: %w", name, err)
	}
	if err := d.watch(ctx, func(r *status.Report) bool { return allReady(r, total) && owns(r, i) == 0 && r.Unowned == 0 }); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "    every cluster owned and Ready %v after the drain began; the new owners recorded why:\n", time.Since(start).Round(100*time.Millisecond))
	var events corev1.EventList
	if err := d.c.List(ctx, &events, client.InNamespace("default")); err == nil {
		shown := 0
		for _, e := range events.Items {
			if e.Reason == v1alpha1.ReasonOwnerChanged && strings.Contains(e.Message, "("+v1alpha1.TransferDrain+")") && shown < 3 {
				fmt.Fprintf(d.out, "      %s: %s\n", e.InvolvedObject.Name, e.Message)
				shown++
			}
		}
	}
	fmt.Fprintf(d.out, "==> clustershard uncordon %s: the ring gives it its share back\n", name)
	start = time.Now()
	out, err = d.cli(ctx, "uncordon", name)
	fmt.Fprint(d.out, indent(out))
	if err != nil {
		return fmt.Errorf("clustershard uncordon %s: %w", name, err)
	}
	if err := d.watch(ctx, func(r *status.Report) bool { return allReady(r, total) && owns(r, i) > 0 }); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "    rebalanced %v after the uncordon\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// cli runs the clustershard binary's operator command against the demo.
func (d *demo) cli(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, d.o.Binary, append(args, "--kubeconfig", d.kcPath, "--namespace", Namespace)...).CombinedOutput()
	return string(out), err
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if l != "" {
			b.WriteString("    " + l + "\n")
		}
	}
	return b.String()
}

func allReady(r *status.Report, total int) bool {
	if len(r.Clusters) != total || r.Unowned > 0 {
		return false
	}
	for _, c := range r.Clusters {
		if c.Ready != "True" || c.Owner == "" {
			return false
		}
	}
	return true
}

func owns(r *status.Report, i int) int {
	for _, rep := range r.Replicas {
		if rep.Name == replicaName(i) && !rep.Expired {
			return rep.Owned
		}
	}
	return 0
}

func replicaName(i int) string { return "replica-" + strconv.Itoa(i) }

// watch prints the ownership view every Refresh until done holds.
func (d *demo) watch(ctx context.Context, done func(*status.Report) bool) error {
	example, _ := remotecopy.ParseKind(fleet.ExampleKind)
	strict, _ := remotecopy.ParseKind(StrictKind)
	tty := isTerminal(d.out)
	for {
		r, err := status.Collect(ctx, d.c, Namespace, []remotecopy.Kind{example, strict})
		if err == nil {
			// Warn only of disagreements that outlast a refresh: a
			// change in progress shows some for a renew period.
			all := *r
			all.Warnings = slices.Clone(r.Warnings)
			if d.last != nil {
				r.Confirm(d.last)
			} else {
				r.Warnings = nil
			}
			d.last = &all
			if tty {
				fmt.Fprint(d.out, "\033[H\033[2J")
				_ = r.WriteTable(d.out)
				fmt.Fprint(d.out, d.footer)
			} else {
				fmt.Fprintf(d.out, "    [%5.1fs] unowned %d;", time.Since(d.started).Seconds(), r.Unowned)
				for _, rep := range r.Replicas {
					st := ""
					if rep.Expired {
						st = " (expired)"
					}
					fmt.Fprintf(d.out, " %s owns %d%s;", rep.Name, rep.Owned, st)
				}
				fmt.Fprintln(d.out)
			}
			if done(r) {
				if !tty {
					_ = r.WriteTable(d.out)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d.o.Refresh):
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (d *demo) createClusters(ctx context.Context) error {
	_, err := fleet.Populate(ctx, d.c, d.cp, fleet.Options{
		Namespace: Namespace, ScopePrefix: "demo-", ClustersPerRemote: d.o.ClustersPerRemote, ObjectsPerCluster: d.o.ObjectsPerCluster,
	})
	return err
}

func (d *demo) startReplica(i int) error {
	logf, err := os.OpenFile(filepath.Join(d.dir, replicaName(i)+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	lease := d.o.LeaseDuration
	cmd := exec.Command(d.o.Binary, "run",
		"--kubeconfig", d.kcPath, "--namespace", Namespace, "--replica-id", replicaName(i),
		"--replicate-kind", fleet.ExampleKind, "--replicate-kind", StrictKind,
		"--lease-duration", lease.String(), "--renew-deadline", (lease * 2 / 3).String(), "--retry-period", (lease / 6).String(),
		"--probe-interval", "2s", "--shutdown-timeout", "20s",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	cmd.Stdout, cmd.Stderr = logf, logf
	// The replica dies with the demo even if the demo itself is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(exited)
	}()
	d.replicas[i], d.exited[i] = cmd, exited
	return nil
}

func (d *demo) kill(i int) {
	if cmd := d.replicas[i]; cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-d.exited[i]
		delete(d.replicas, i)
	}
}

// cleanup stops the replicas gracefully (SIGTERM, then SIGKILL after 40s),
// the control plane, and removes the temporary directory.
func (d *demo) cleanup() error {
	fmt.Fprintln(d.out, "==> Cleaning up: stopping replicas, the control plane, removing temporary files")
	for _, cmd := range d.replicas {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(40 * time.Second)
	for i := range d.replicas {
		select {
		case <-d.exited[i]:
		case <-deadline:
			d.kill(i)
		}
	}
	var errs []error
	if d.cp != nil {
		errs = append(errs, d.cp.Stop())
	}
	if d.dir != "" {
		errs = append(errs, os.RemoveAll(d.dir))
	}
	return errors.Join(errs...)
}
