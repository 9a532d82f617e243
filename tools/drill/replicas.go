package drill

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/clustershard/clustershard/shard"
	"github.com/clustershard/clustershard/test/netproxy"
	"github.com/clustershard/clustershard/tools/fleet"
)

// replica is one incarnation of a replica process.
type replica struct {
	id      string
	journal string
	log     string // its stdout and stderr
	probe   string // host:port of its health probes on loopback
	metrics string // host:port of its metrics on loopback
	pprof   string // host:port of its profiles on loopback ("" when off)
	cpu     *cpuRecorder
	cmd     *exec.Cmd
	exited  chan struct{}
	// killedAt is when the process was seen dead after the runner's SIGKILL
	// or SIGTERM; zero while it runs.
	killedAt time.Time
	// paused is set while the process is SIGSTOPped.
	paused bool
	// expectExit is set when the runner stops the process on purpose;
	// termed when it did so with SIGTERM (a clean exit is expected).
	expectExit, termed bool
	// leakChecked is set once its exit record was checked (I4).
	leakChecked bool
	// renewDeadline is its membership's: its authority lapses that long
	// after a renewal was sent when none followed (the checker's I1);
	// grace how long past that a renewal's answer may keep it.
	renewDeadline, grace time.Duration
}

// incarnations are every replica process started, for the checker.
type incarnations struct {
	all   []*replica
	live  map[string]*replica
	count map[string]int
}

func (r *Runner) startReplica(id string) error {
	rep, err := r.spawn(id)
	if err != nil {
		return err
	}
	r.reps.live[id] = rep
	return nil
}

// spawn starts one more process with --replica-id id and records it for the
// checker, without making it the live process of id.
func (r *Runner) spawn(id string) (*replica, error) {
	n := r.reps.count[id]
	r.reps.count[id] = n + 1
	base := filepath.Join(r.dir, id+"."+strconv.Itoa(n))
	logf, err := os.Create(base + ".log")
	if err != nil {
		return nil, err
	}
	kubeconfig, err := r.replicaKubeconfig(id)
	if err != nil {
		_ = logf.Close()
		return nil, err
	}
	// The probe's port, the metrics' and the profiles' when served: asked
	// for at once, or the first, still free, could be handed out again as
	// the second.
	addrs, err := freeLoopbackAddrs(3)
	if err != nil {
		_ = logf.Close()
		return nil, err
	}
	probe, metricsAddr, pprofAddr := addrs[0], "0", "0"
	if r.o.Metrics {
		metricsAddr = addrs[1]
	}
	if r.o.Profile {
		pprofAddr = addrs[2]
	}
	ov := r.overrides[id]
	lease, renew, retry := r.o.LeaseDuration, r.renewDeadline(), r.o.retryPeriod()
	if ov.leaseDuration != 0 {
		lease, renew = ov.leaseDuration, ov.renewDeadline
	}
	cmd := exec.Command(r.o.Binary, "run",
		"--kubeconfig", kubeconfig, "--namespace", Namespace, "--replica-id", id,
		"--replicate-kind", fleet.ExampleKind,
		"--lease-duration", lease.String(), "--renew-deadline", renew.String(), "--retry-period", retry.String(),
		"--probe-interval", "1s", "--stop-timeout", "5s", "--shutdown-timeout", "25s", "--expected-replicas", strconv.Itoa(r.o.Replicas), "--ownership-journal", base+".journal",
		"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", probe, "--pprof-bind-address", pprofAddr, "--zap-time-encoding", "rfc3339nano")
	if v := os.Getenv("CLUSTERSHARD_DRILL_LOG_LEVEL"); v != "" {
		cmd.Args = append(cmd.Args, "--zap-log-level", v)
	}
	cmd.Args = append(cmd.Args, r.o.ReplicaArgs...)
	cmd.Args = append(cmd.Args, ov.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, err
	}
	rep := &replica{id: id, journal: base + ".journal", log: base + ".log", probe: probe, metrics: metricsAddr, cmd: cmd, exited: make(chan struct{}), renewDeadline: renew, grace: shard.RenewalGrace(lease, renew)}
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(rep.exited)
	}()
	if r.o.Profile {
		rep.pprof = pprofAddr
		if r.o.ProfileCPU {
			rep.cpu = recordCPU(pprofAddr, rep.exited)
		}
	}
	r.reps.all = append(r.reps.all, rep)
	return rep, nil
}

// startReady starts the replicas ids together and waits until each is ready.
func (r *Runner) startReady(ctx context.Context, ids ...string) error {
	for _, id := range ids {
		if err := r.startReplica(id); err != nil {
			return err
		}
	}
	for _, id := range ids {
		if err := r.waitReady(ctx, id, r.readyTimeout()); err != nil {
			return err
		}
	}
	return nil
}

// replicaHost is the loopback address the replicas' probes, metrics and
// profiles listen on: one of 127.0.0.0/8 picked at random per process, not
// 127.0.0.1, where every other process (API servers and etcd of tests run
// in parallel, their clients' ephemeral ports) takes ports: a port found
// free there could be taken again before the replica binds it, and the
// replica would exit at start-up.
var replicaHost = fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(256), 1+rand.IntN(254))

// freeLoopbackAddrs returns n distinct addresses on replicaHost with ports
// free right now.
func freeLoopbackAddrs(n int) ([]string, error) {
	var out []string
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(replicaHost, "0"))
		if err != nil {
			return nil, err
		}
		defer func() { _ = l.Close() }()
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// waitReady waits until replica id answers its readiness probe, as the
// StatefulSet controller does before it moves on to the next pod.
func (r *Runner) waitReady(ctx context.Context, id string, timeout time.Duration) error {
	rep := r.reps.live[id]
	hc := &http.Client{Timeout: time.Second}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-rep.exited:
			return false, fmt.Errorf("%s exited with status %d before it was ready; its log ends:\n%s", id, rep.cmd.ProcessState.ExitCode(), logTail(rep.log, 5))
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+rep.probe+"/readyz", nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready within %v: %w", id, timeout, err)
	}
	return nil
}

// replicaKubeconfig returns the kubeconfig of replica id: the management
// cluster's, reached through the replica's own proxy (made on first use).
func (r *Runner) replicaKubeconfig(id string) (string, error) {
	path := filepath.Join(r.dir, id+".kubeconfig")
	if _, ok := r.proxies[id]; ok {
		return path, nil
	}
	cfg, err := clientcmd.Load(r.cp.Management.KubeConfig)
	if err != nil {
		return "", err
	}
	target, err := url.Parse(r.cp.Management.Config.Host)
	if err != nil {
		return "", err
	}
	p, err := netproxy.New(target.Host)
	if err != nil {
		return "", err
	}
	r.proxies[id] = p
	for _, c := range cfg.Clusters {
		c.Server = "https://" + p.Addr()
	}
	return path, clientcmd.WriteToFile(*cfg, path)
}

func (r *Runner) renewDeadline() time.Duration { return r.o.renewDeadline() }

// override is what a replica's next starts change: its membership timings
// (both set, or neither) and flags added to the usual ones.
type override struct {
	leaseDuration, renewDeadline time.Duration
	args                         []string
}

// kill SIGKILLs a replica and waits until it is gone.
func (r *Runner) kill(id string) {
	rep := r.reps.live[id]
	rep.expectExit = true
	_ = rep.cmd.Process.Signal(syscall.SIGKILL)
	<-rep.exited
	rep.killedAt = time.Now()
	delete(r.reps.live, id)
}

// term SIGTERMs a replica; it must exit with status 0 within 40s (its
// --shutdown-timeout, then its managers' --stop-timeout, and a margin).
func (r *Runner) term(id string) error { return r.termAsync(id)() }

// termAsync SIGTERMs replica id, takes it out of the live ones and returns
// a function that waits for its exit, with status 0 within 40s of the
// signal (else it is killed), to be called on the runner's goroutine: the
// caller may act during the hand-over meanwhile.
func (r *Runner) termAsync(id string) func() error {
	rep := r.reps.live[id]
	rep.expectExit, rep.termed = true, true
	_ = rep.cmd.Process.Signal(syscall.SIGTERM)
	delete(r.reps.live, id)
	timeout := time.After(40 * time.Second)
	return func() error {
		select {
		case <-rep.exited:
			rep.killedAt = time.Now()
		case <-timeout:
			r.reps.live[id] = rep
			r.kill(id)
			return fmt.Errorf("%s did not exit within 40s of SIGTERM", id)
		}
		if code := rep.cmd.ProcessState.ExitCode(); code != 0 {
			return fmt.Errorf("%s exited with status %d after SIGTERM; its log ends:\n%s", id, code, logTail(rep.log, 5))
		}
		return nil
	}
}

// leaks checks the exit record of every replica SIGTERMed and exited since
// the last call (I4): it must exist and list no goroutine still running.
func (r *Runner) leaks() []string {
	var out []string
	for _, rep := range r.reps.all {
		if !rep.termed || rep.leakChecked || rep.killedAt.IsZero() || rep.cmd.ProcessState.ExitCode() != 0 {
			continue
		}
		rep.leakChecked = true
		entries, err := ReadJournal(rep.journal)
		if err != nil {
			out = append(out, err.Error())
			continue
		}
		var exit *shard.JournalEntry
		for i := range entries {
			if entries[i].Event == shard.JournalExit {
				exit = &entries[i]
			}
		}
		switch {
		case exit == nil:
			out = append(out, fmt.Sprintf("%s (%s) exited without its exit record", rep.id, filepath.Base(rep.journal)))
		case exit.Detail != "":
			out = append(out, fmt.Sprintf("%s (%s) leaked goroutines: %s", rep.id, filepath.Base(rep.journal), exit.Detail))
		}
	}
	return out
}

// unexpectedExits lists processes that ended without the runner asking (I4).
func (r *Runner) unexpectedExits() []string {
	var out []string
	for _, rep := range r.reps.all {
		select {
		case <-rep.exited:
			if !rep.expectExit {
				out = append(out, fmt.Sprintf("%s exited on its own: %v", rep.id, rep.cmd.ProcessState))
			}
		default:
		}
	}
	return out
}

// restartWith restarts replica id with ov for this one start (its next
// start has the usual flags) and waits until it is ready and every cluster
// runs again.
func (r *Runner) restartWith(ctx context.Context, id string, ov override) error {
	if err := r.term(id); err != nil {
		return err
	}
	r.overrides[id] = ov
	err := r.startReady(ctx, id)
	delete(r.overrides, id)
	if err != nil {
		return err
	}
	return r.settle(ctx, 60*time.Second)
}

// pausePast SIGSTOPs replica id, measures the recovery of the clusters it
// held (I2, within bound), keeps it stopped until hold has passed since the
// stop even if the take-over was quick, and wakes it with SIGCONT.
func (r *Runner) pausePast(ctx context.Context, res *Result, id string, owned []string, bound, hold time.Duration) error {
	rep := r.reps.live[id]
	at := time.Now()
	if err := rep.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	rep.paused = true
	r.moved(ctx, res, "", owned, at, bound)
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, hold+time.Minute, true, func(context.Context) (bool, error) {
		return time.Since(at) > hold, nil
	})
	rep.paused = false
	return rep.cmd.Process.Signal(syscall.SIGCONT)
}

// logTail returns the last n lines of the log at path, indented (or why
// it cannot be read).
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "  (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines = lines[max(0, len(lines)-n):]
	return "  " + strings.Join(lines, "\n  ")
}
