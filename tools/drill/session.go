package drill

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/shard"
	"github.com/clustershard/clustershard/test/netproxy"
	"github.com/clustershard/clustershard/tools/fleet"
)

// Session is a drill's fleet without its scenarios: the local control plane,
// the populated fleet and R replica processes of the real binary with their
// journals, for measurements (the benchmark harness). Options.Scenarios and
// Churn are ignored.
type Session struct {
	r      *Runner
	closed bool
}

// NewSession starts a fleet and returns once every cluster is owned and
// every remote manager runs.
func NewSession(ctx context.Context, o Options) (*Session, error) {
	if o.Replicas < 1 || o.Remotes < 1 || o.ClustersPerRemote < 0 || o.ObjectsPerCluster < 0 || o.LeaseDuration < 2*time.Second {
		return nil, errors.New("a session needs replicas ≥ 1, remotes ≥ 1, clusters and objects ≥ 0, a lease of at least 2s")
	}
	if o.Converge == 0 {
		o.Converge = 5 * time.Minute
	}
	r := &Runner{o: o, reps: incarnations{live: map[string]*replica{}, count: map[string]int{}}, proxies: map[string]*netproxy.Proxy{}, overrides: map[string]override{}, seenI1: map[string]bool{}}
	if err := r.start(ctx); err != nil {
		return nil, errors.Join(err, r.cleanup())
	}
	return &Session{r: r}, nil
}

// Close stops the replicas and the control plane; once closed, it does
// nothing.
func (s *Session) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	return s.r.cleanup()
}

// AllOwned and StartUp are the times from the replicas' start until every
// cluster Lease was held and until every remote manager ran.
func (s *Session) AllOwned() time.Duration { return s.r.allOwned }

// StartUp is the time from the replicas' start until every manager ran.
func (s *Session) StartUp() time.Duration { return s.r.startUp }

// ColdStartMoves are the clusters that changed hands during the start-up.
func (s *Session) ColdStartMoves() ColdStartMoves { return s.r.coldMoves }

// Client is an admin client of the management cluster.
func (s *Session) Client() client.Client { return s.r.c }

// Clusters are the fleet's clusters.
func (s *Session) Clusters() []fleet.Cluster { return s.r.clusters }

// Holders returns the holder of every cluster Lease.
func (s *Session) Holders(ctx context.Context) (map[string]string, error) { return s.r.holders(ctx) }

// LiveIDs returns the running replicas' identities, in ordinal order.
func (s *Session) LiveIDs() []string { return s.r.liveIDs() }

// ReplicaID is the identity of replica ordinal i.
func ReplicaID(i int) string { return replicaID(i) }

// Kill SIGKILLs replica id and returns when it was seen dead.
func (s *Session) Kill(id string) time.Time {
	s.r.kill(id)
	return s.r.reps.all[s.indexOf(id)].killedAt
}

// Term SIGTERMs replica id and waits for its exit (status 0).
func (s *Session) Term(id string) error { return s.r.term(id) }

// StartReady starts replicas and waits until each reports ready.
func (s *Session) StartReady(ctx context.Context, ids ...string) error {
	return s.r.startReady(ctx, ids...)
}

// Settle waits until every cluster's manager runs on a live holder.
func (s *Session) Settle(ctx context.Context, timeout time.Duration) error {
	return s.r.settle(ctx, timeout)
}

// Converged waits until every source has its current copy and status (I3),
// bounded by Options.Converge.
func (s *Session) Converged(ctx context.Context) error {
	var res Result
	s.r.converged(ctx, &res, s.r.duration)
	if !res.Pass() {
		return fmt.Errorf("not converged: %v", res.Violations["I3"])
	}
	return nil
}

// Gaps returns, per cluster of clusters, the time it went without a remote
// manager after since: from the end of the authority that was open at since
// (its manager stopped, or its replica died) until a manager of another
// incarnation ran it. Clusters without both ends are left out.
func (s *Session) Gaps(clusters []string, since time.Time) (map[string]time.Duration, error) {
	gs, err := s.gaps(clusters, since)
	out := make(map[string]time.Duration, len(gs))
	for c, g := range gs {
		out[c] = g.run.Sub(g.end)
	}
	return out, err
}

// Span returns how long after since the last of clusters ran on its new
// owner (the whole hand-over, paced or not); 0 when none did.
func (s *Session) Span(clusters []string, since time.Time) (time.Duration, error) {
	gs, err := s.gaps(clusters, since)
	var last time.Duration
	for _, g := range gs {
		last = max(last, g.run.Sub(since))
	}
	return last, err
}

// gap is when a cluster's authority open at a time ended, and when a
// manager of another incarnation first ran it after that.
type gap struct{ end, run time.Time }

func (s *Session) gaps(clusters []string, since time.Time) (map[string]gap, error) {
	js, err := s.r.journals()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ends := map[string]time.Time{}
	endOf := map[string]*replica{}
	for rep, entries := range js {
		for _, iv := range HeldIntervals(entries, rep.renewDeadline, rep.grace, rep.killedAt, now) {
			if !iv.Start.After(since) && iv.End.After(since) && iv.End.Before(now) {
				ends[iv.Cluster], endOf[iv.Cluster] = iv.End, rep
			}
		}
	}
	out := map[string]gap{}
	for rep, entries := range js {
		for _, e := range entries {
			end, ok := ends[e.Cluster]
			if !ok || e.Event != shard.JournalRunning || endOf[e.Cluster] == rep || e.Time.Before(end) || !slices.Contains(clusters, e.Cluster) {
				continue
			}
			if g, seen := out[e.Cluster]; !seen || e.Time.Before(g.run) {
				out[e.Cluster] = gap{end: end, run: e.Time}
			}
		}
	}
	return out, nil
}

// RSS returns the resident set size in bytes of every live replica process.
func (s *Session) RSS() (map[string]int64, error) {
	out := map[string]int64{}
	for id, rep := range s.r.reps.live {
		n, err := ProcessRSS(rep.cmd.Process.Pid)
		if err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, nil
}

// WaitOwned waits until n clusters are owned and returns how long it took.
func (s *Session) WaitOwned(ctx context.Context, n int, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		h, err := s.r.holders(ctx)
		return err == nil && len(h) >= n, nil
	})
	return time.Since(start), err
}

func (s *Session) indexOf(id string) int {
	for i := len(s.r.reps.all) - 1; i >= 0; i-- {
		if s.r.reps.all[i].id == id {
			return i
		}
	}
	return -1
}

// ProcessRSS is the resident set of process pid in bytes (VmRSS, from /proc).
func ProcessRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// Config is the admin rest.Config of the management cluster.
func (s *Session) Config() *rest.Config { return s.r.cp.Management.Config }

// ProxyCluster points cluster cl's kubeconfig Secret at a new loopback
// proxy to its remote API server and waits until its manager runs through
// it; restore points it back. Faults are staged on the proxy.
func (s *Session) ProxyCluster(ctx context.Context, cl fleet.Cluster) (*netproxy.Proxy, func() error, error) {
	return s.r.proxyCluster(ctx, cl)
}

// Crashed returns the replicas whose process ended without the session
// stopping it (a crash or a fatal error).
func (s *Session) Crashed() []string {
	var out []string
	for _, rep := range s.r.reps.all {
		select {
		case <-rep.exited:
			if rep.killedAt.IsZero() {
				out = append(out, rep.id)
			}
		default:
		}
	}
	return out
}
