package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/deploy"
	"github.com/clustershard/clustershard/shard"
	"github.com/clustershard/clustershard/test/admissionhook"
	"github.com/clustershard/clustershard/test/localcluster"
	"github.com/clustershard/clustershard/test/netproxy"
	"github.com/clustershard/clustershard/tools/fleet"
)

// Namespace holds the drill's Leases and kubeconfig Secrets.
const Namespace = "clustershard-system"

// Scenarios are the faults the runner knows, in the order it runs them.
var Scenarios = []string{"kill", "term", "pause", "queued-writes-pause", "partition", "blackhole", "late-delivery", "release-fails", "slow-remote-write", "apiserver-restart", "rolling", "remote-down", "kubeconfig", "lease-tamper", "retarget", "mixed-timings", "scale", "duplicate-identity"}

// Options size and time a drill.
type Options struct {
	// Binary is the clustershard binary run as replicas.
	Binary string
	// Metrics makes each replica serve its metrics on a loopback port
	// (Session's scrapes); off, they serve none.
	Metrics bool
	// Profile makes each replica serve Go's profiles on a loopback port
	// (Session.Profile); with ProfileCPU, each replica's CPU profile is
	// recorded from its start, in consecutive 2 s windows, until it exits
	// (Session.CPUProfiles).
	Profile, ProfileCPU bool
	Replicas            int
	Remotes             int
	ClustersPerRemote   int
	ObjectsPerCluster   int
	LeaseDuration       time.Duration
	// RenewDeadline and RetryPeriod of the replicas' membership; zero:
	// half and an eighth of LeaseDuration.
	RenewDeadline, RetryPeriod time.Duration
	// Scenarios to run, from Scenarios.
	Scenarios []string
	// Churn creates, updates and deletes sources continuously during each
	// fault.
	Churn bool
	// Helm makes every cluster install the fleet's agent chart through
	// spec.install.helm, so Helm's remote writes are checked by I1 too.
	Helm bool
	// HelmHookDelay, with Helm, holds the agent chart's post-install hook
	// this long in each remote's admission, so every install takes seconds
	// and is still on its way when replicas start, join and leave.
	HelmHookDelay time.Duration
	// ReplicaArgs are added to every replica's command line (say
	// --replicate-workers for a measurement).
	ReplicaArgs []string
	// RemoteLatency, when set, puts each remote API server behind a
	// loopback proxy that adds it to every round trip of the replicas (not
	// of the drill's checks), as a remote cluster across a WAN costs.
	RemoteLatency time.Duration
	// Converge bounds I3: every object synced after a fault.
	Converge time.Duration
	// Dir keeps the replicas' logs and journals; empty: a temporary
	// directory removed afterwards.
	Dir string
	Out io.Writer
}

// renewDeadline and retryPeriod are the replicas' timings, defaults filled in.
func (o *Options) renewDeadline() time.Duration {
	if o.RenewDeadline == 0 {
		return o.LeaseDuration / 2
	}
	return o.RenewDeadline
}

func (o *Options) retryPeriod() time.Duration {
	if o.RetryPeriod == 0 {
		return o.LeaseDuration / 8
	}
	return o.RetryPeriod
}

func (o *Options) validate() error {
	var errs []error
	if o.Replicas < 2 || o.Remotes < 1 || o.ClustersPerRemote < 1 || o.ObjectsPerCluster < 0 {
		errs = append(errs, errors.New("a drill needs --replicas ≥ 2, --remotes ≥ 1, --clusters-per-remote ≥ 1, --objects-per-cluster ≥ 0"))
	}
	if o.LeaseDuration < 2*time.Second {
		errs = append(errs, errors.New("--lease-duration must be at least 2s"))
	}
	if err := shard.ValidateTiming(o.LeaseDuration, o.renewDeadline(), o.retryPeriod()); err != nil {
		errs = append(errs, fmt.Errorf("--lease-duration %v, --renew-deadline %v, --retry-period %v: %w", o.LeaseDuration, o.renewDeadline(), o.retryPeriod(), err))
	}
	for _, s := range o.Scenarios {
		if !slices.Contains(Scenarios, s) {
			errs = append(errs, fmt.Errorf("unknown scenario %q (known: %v)", s, Scenarios))
		}
	}
	if len(o.Scenarios) == 0 {
		errs = append(errs, errors.New("no scenario"))
	}
	return errors.Join(errs...)
}

// Runner runs one drill.
type Runner struct {
	o          Options
	dir        string
	kubeconfig string
	cp         *localcluster.ControlPlane
	c          client.Client
	clusters   []fleet.Cluster
	remotes    []client.Client
	reps       incarnations
	proxies    map[string]*netproxy.Proxy // by replica id: its way to the management API server
	latency    []*netproxy.Proxy          // by remote: the replicas' way to it (Options.RemoteLatency)
	overrides  map[string]override        // by replica id: what its next starts change
	churned    int                        // churn objects made so far
	retargets  int                        // retarget rounds so far
	// moving: the fleet has moving sources in SharedNamespace (a drill's,
	// not a measuring session's).
	moving bool
	// seenI1 holds the I1 violations reported so far.
	seenI1   map[string]bool
	duration string // the current spec.duration of every source
	// allOwned and startUp: from the replicas' start until every cluster
	// Lease was held, and until every remote manager ran.
	allOwned, startUp time.Duration
	// startedAt is when the replicas of the cold start were started.
	startedAt time.Time
	// hook serves the webhook of HelmHookDelay.
	hook *admissionhook.Server
	// coldMoves are the clusters that changed hands during the start-up.
	coldMoves ColdStartMoves
	// finalLeaks is the leak check (I4) of the replicas stopped at cleanup.
	finalLeaks []string
}

// Run starts a local control plane and the replicas, runs every scenario
// and returns the report; err is for a drill that could not run at all.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Converge == 0 {
		o.Converge = 60 * time.Second
	}
	r := &Runner{o: o, reps: incarnations{live: map[string]*replica{}, count: map[string]int{}}, proxies: map[string]*netproxy.Proxy{}, overrides: map[string]override{}, moving: true, seenI1: map[string]bool{}}
	rep, err := r.run(ctx)
	err = errors.Join(err, r.cleanup())
	// I4: nothing left behind — no replica, API server or etcd process, and
	// no goroutine in the replicas stopped at the end.
	if left := localcluster.Children(); rep != nil && len(left) > 0 {
		rep.Leftovers = left
	}
	if rep != nil {
		rep.Leaks = r.finalLeaks
	}
	return rep, err
}

func (r *Runner) logf(format string, args ...any) { fmt.Fprintf(r.o.Out, format+"\n", args...) }

func (r *Runner) run(ctx context.Context) (*Report, error) {
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	report := &Report{Machine: machine(), Replicas: r.o.Replicas, Clusters: len(r.clusters),
		Objects: len(r.clusters) * r.o.ObjectsPerCluster, LeaseDuration: r.o.LeaseDuration.String(),
		RenewDeadline: r.o.renewDeadline().String(), RetryPeriod: r.o.retryPeriod().String()}
	for _, name := range r.o.Scenarios {
		res := r.scenario(ctx, name)
		report.Scenarios = append(report.Scenarios, res)
		r.logf("%s", res.Line())
		if ctx.Err() != nil {
			break
		}
	}
	return report, nil
}

// start brings up the control plane, the fleet and the replicas, and waits
// until every cluster is owned (r.allOwned after the replicas' start) and
// every manager runs (r.startUp).
func (r *Runner) start(ctx context.Context) error {
	var err error
	r.dir = r.o.Dir
	if r.dir == "" {
		if r.dir, err = os.MkdirTemp("", "clustershard-drill-"); err != nil {
			return err
		}
	} else if err := emptyDir(r.dir); err != nil {
		return fmt.Errorf("keep-dir: %w", err)
	}
	crds, err := deploy.CRDs(true)
	if err != nil {
		return err
	}
	r.logf("==> control plane: management + %d remotes", r.o.Remotes)
	if r.cp, err = localcluster.Start(ctx, localcluster.Options{Remotes: r.o.Remotes, CRDs: crds, AuditDir: r.dir}); err != nil {
		return err
	}
	r.kubeconfig = filepath.Join(r.dir, "management.kubeconfig")
	if err := os.WriteFile(r.kubeconfig, r.cp.Management.KubeConfig, 0o600); err != nil {
		return err
	}
	if r.c, err = checkerClient(r.cp.Management); err != nil {
		return err
	}
	for _, rc := range r.cp.Remotes {
		c, err := checkerClient(rc)
		if err != nil {
			return err
		}
		r.remotes = append(r.remotes, c)
	}
	fo := fleet.Options{
		Namespace: Namespace, ScopePrefix: "drill-", ClustersPerRemote: r.o.ClustersPerRemote, ObjectsPerCluster: r.o.ObjectsPerCluster,
	}
	if r.o.Helm {
		if fo.HelmChart, err = fleet.WriteAgentChart(r.dir); err != nil {
			return err
		}
		if r.o.HelmHookDelay > 0 {
			if err := r.slowInstalls(ctx, r.o.HelmHookDelay); err != nil {
				return err
			}
		}
	}
	if r.moving {
		fo.SharedNamespace = SharedNamespace
	}
	if r.clusters, err = fleet.Populate(ctx, r.c, r.cp, fo); err != nil {
		return err
	}
	r.duration = fleet.ObjectDuration
	if r.o.RemoteLatency > 0 {
		if err := r.behindLatency(ctx); err != nil {
			return err
		}
	}
	if r.moving {
		if err := r.ensureMovingSources(ctx); err != nil {
			return err
		}
	}
	r.logf("==> %d replicas, %d clusters, %d objects (logs and journals in %s)", r.o.Replicas, len(r.clusters), len(r.clusters)*r.o.ObjectsPerCluster, r.dir)
	started := time.Now()
	for i := range r.o.Replicas {
		if err := r.startReplica(replicaID(i)); err != nil {
			return err
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		h, err := r.holders(ctx)
		return err == nil && len(h) == len(r.clusters), nil
	}); err != nil {
		return fmt.Errorf("initial ownership: %w", err)
	}
	r.allOwned, r.startedAt = time.Since(started), started
	for i := range r.o.Replicas {
		if err := r.waitReady(ctx, replicaID(i), r.readyTimeout()); err != nil {
			return err
		}
	}
	if err := r.settle(ctx, 5*time.Minute); err != nil {
		return fmt.Errorf("initial settle: %w", err)
	}
	r.startUp = time.Since(started)
	if js, err := r.journals(); err == nil {
		r.coldMoves = coldStartMoves(js, time.Now())
	}
	r.logf("==> cold start: every cluster owned after %v, every manager running after %v; %d clusters changed hands meanwhile, %d of them after their manager had started",
		r.allOwned.Round(time.Millisecond), r.startUp.Round(time.Millisecond), r.coldMoves.Moved, r.coldMoves.Running)
	return nil
}

// checkerClient is an admin client of a cluster that the checks' polling
// does not throttle.
func checkerClient(c *localcluster.Cluster) (client.Client, error) {
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	return client.New(cfg, client.Options{Scheme: fleet.Scheme()})
}

// remote returns an admin client of remote API server i.
func (r *Runner) remote(i int) client.Client { return r.remotes[i] }

func replicaID(i int) string { return fmt.Sprintf("replica-%d", i) }

// cleanup stops every replica gracefully, the control plane, and removes the
// temporary directory.
func (r *Runner) cleanup() error {
	var errs []error
	for id := range r.reps.live {
		errs = append(errs, r.term(id))
	}
	r.finalLeaks = r.leaks() // before the journals are removed
	for _, p := range r.proxies {
		errs = append(errs, p.Close())
	}
	for _, p := range r.latency {
		errs = append(errs, p.Close())
	}
	if r.hook != nil {
		r.hook.Down()
	}
	if r.cp != nil {
		errs = append(errs, r.cp.Stop())
	}
	if r.o.Dir == "" && r.dir != "" {
		errs = append(errs, os.RemoveAll(r.dir))
	}
	return errors.Join(errs...)
}

// emptyDir creates dir, or accepts it when it exists and is empty: journals
// and audit logs are appended to, so an earlier drill's would be judged with
// this one's (and read as writes out of authority).
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty (%d entries, e.g. %s): an earlier drill's journals and audit logs would be appended to; give a new or empty folder", dir, len(entries), entries[0].Name())
	}
	return nil
}
