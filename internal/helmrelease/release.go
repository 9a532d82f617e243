package helmrelease

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// MaxHistory is how many revisions of a release Helm keeps.
const MaxHistory = 10

// Action is what Ensure did.
type Action string

// Actions of Ensure.
const (
	// ActionNone: the release was deployed with the same chart version and values.
	ActionNone Action = "none"
	// ActionInstalled: the release was installed.
	ActionInstalled Action = "installed"
	// ActionReinstalled: a release that never deployed (its install failed
	// or was interrupted) was installed again.
	ActionReinstalled Action = "reinstalled"
	// ActionUpgraded: the release was upgraded.
	ActionUpgraded Action = "upgraded"
)

// Spec is the release wanted in a remote cluster.
type Spec struct {
	// Name and Namespace of the release.
	Name, Namespace string
	// Chart to deploy.
	Chart *chart.Chart
	// Values given to the chart.
	Values map[string]any
	// Timeout bounds hooks (default 5m); Ensure does not wait for workloads.
	Timeout time.Duration
	// NamespaceLabels label the release namespace when Ensure creates it
	// (only when it installs or upgrades: a release up to date costs one read).
	NamespaceLabels map[string]string
}

// Result is what Ensure did and the release's latest revision.
type Result struct {
	// Action taken.
	Action Action
	// Recovered says that Ensure found what an interrupted operation left
	// (a revision pending, or an uninstall half done) and repaired it
	// before acting; Found says what it found, e.g. "revision 1
	// pending-install".
	Recovered bool
	Found     string
	// Release is the latest revision after Ensure.
	Release *release.Release
}

// Client runs Helm actions against one remote cluster.
type Client struct {
	cfg *action.Configuration
	ns  string
	log logr.Logger

	mu         sync.Mutex
	failure    string              // Helm's last "Failed ..." debug line: it logs some causes only
	transports []http.RoundTripper // made for this client, closed by Close
	cut        error               // why the current operation was interrupted (see interrupting)
}

// NewClient returns a Helm client for releases in namespace of the cluster
// behind cfg (release records are Secrets in that namespace). Close it after
// use: its connections are its own. An operation (Ensure, Uninstall) of the
// client stops writing at its first write that ends without a decision, and
// returns ErrInterrupted: see interrupting.
func NewClient(cfg *rest.Config, namespace string, log logr.Logger) (*Client, error) {
	c := &Client{cfg: new(action.Configuration), ns: namespace, log: log}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		c.mu.Lock()
		c.transports = append(c.transports, rt)
		c.mu.Unlock()
		return &interrupting{next: rt, c: c}
	})
	debug := func(format string, v ...any) {
		msg := fmt.Sprintf(format, v...)
		log.V(1).Info(msg)
		if strings.Contains(msg, "Failed") {
			c.mu.Lock()
			c.failure = msg
			c.mu.Unlock()
		}
	}
	if err := c.cfg.Init(newRESTGetter(cfg, namespace), namespace, "secret", debug); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	c.cfg.Releases.MaxHistory = MaxHistory
	return c, nil
}

// Close closes the idle connections of the client's transports.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rt := range c.transports {
		utilnet.CloseIdleConnectionsFor(rt)
	}
	c.transports = nil
}

// withCause appends the last failure Helm only logged to err.
func (c *Client) withCause(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failure == "" {
		return err
	}
	return fmt.Errorf("%w (%s)", err, c.failure)
}

// History returns the release's revisions, oldest first (none: empty).
func (c *Client) History(name string) ([]*release.Release, error) {
	h, err := c.cfg.Releases.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the history of release %s/%s: %w", c.ns, name, err)
	}
	releaseutil.SortByRevision(h)
	return h, nil
}

// UpToDate reports whether rel is deployed with ch's name and version and vals.
func UpToDate(rel *release.Release, ch *chart.Chart, vals map[string]any) bool {
	return rel != nil && rel.Info != nil && rel.Info.Status == release.StatusDeployed &&
		rel.Chart != nil && rel.Chart.Metadata != nil &&
		rel.Chart.Metadata.Name == ch.Metadata.Name && rel.Chart.Metadata.Version == ch.Metadata.Version &&
		HashValues(rel.Config) == HashValues(vals)
}

// Ensure brings the release to spec: it installs it when absent, upgrades it
// when the chart version or the values differ from the deployed revision,
// and does nothing otherwise (no new revision). It never leaves a release
// stuck, and never makes a failed revision of an interruption: the caller
// owns the cluster, so a revision found pending-install, -upgrade or
// -rollback was left by an operation that is not running any more (a
// replica killed mid-way, or one whose hand-over cut it). That revision
// never took effect as a whole; its record is removed and the operation is
// made again in its place, at the same revision number: the release is
// upgraded when a revision deployed before (the objects the interrupted one
// changed are Helm's, and adopted), installed otherwise. helm history then
// reads as if nothing had been interrupted. An interrupted uninstall is
// finished first. Ensure interrupts itself the same way when one of its
// writes ends without a decision (ErrInterrupted): it writes nothing more,
// so no failed revision is recorded for what is not the chart's failure.
//
// Ensure runs to its end even when ctx is cancelled: Helm would otherwise
// return and go on in the background, outside the caller's ownership scope.
// Each write is bounded by the caller's rest.Config (timeout, fence).
func (c *Client) Ensure(ctx context.Context, s Spec) (Result, error) {
	ctx = context.WithoutCancel(ctx)
	c.begin()
	res, err := c.ensure(ctx, s)
	return res, c.interrupted(err)
}

func (c *Client) ensure(ctx context.Context, s Spec) (Result, error) {
	hist, err := c.History(s.Name)
	if err != nil {
		return Result{}, err
	}
	var res Result
	if n := len(hist); n > 0 {
		last := hist[n-1]
		switch {
		case last.Info.Status.IsPending():
			res.Found = fmt.Sprintf("revision %d %s", last.Version, last.Info.Status)
			c.log.Info("Redoing an operation interrupted mid-way: removing the revision it left pending", "release", s.Name, "revision", last.Version, "status", last.Info.Status)
			if _, err := c.cfg.Releases.Delete(last.Name, last.Version); err != nil {
				return res, fmt.Errorf("remove the revision %d of %s left %s by an interrupted operation: %w", last.Version, s.Name, last.Info.Status, err)
			}
			res.Recovered = true
			hist = hist[:n-1]
		case last.Info.Status == release.StatusUninstalling:
			res.Found = fmt.Sprintf("revision %d %s", last.Version, last.Info.Status)
			c.log.Info("Finishing an interrupted uninstall", "release", s.Name, "revision", last.Version)
			if _, err := c.uninstall(ctx, s.Name, s.Timeout); err != nil {
				return res, err
			}
			res.Recovered = true
			if hist, err = c.History(s.Name); err != nil {
				return res, err
			}
		case UpToDate(last, s.Chart, s.Values):
			return Result{Action: ActionNone, Release: last}, nil
		}
	}
	if err := c.ensureNamespace(ctx, s); err != nil {
		return res, err
	}
	if deployedOnce(hist) {
		rel, err := c.upgrade(ctx, s)
		res.Action, res.Release = ActionUpgraded, rel
		return res, err
	}
	res.Action = ActionInstalled
	if len(hist) > 0 {
		res.Action = ActionReinstalled
	}
	rel, err := c.install(ctx, s, len(hist) > 0)
	res.Release = rel
	return res, err
}

// ensureNamespace creates the release namespace when it is missing.
func (c *Client) ensureNamespace(ctx context.Context, s Spec) error {
	cs, err := c.cfg.KubernetesClientSet()
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, s.Namespace, metav1.GetOptions{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("read namespace %s: %w", s.Namespace, err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace, Labels: s.NamespaceLabels}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", s.Namespace, err)
	}
	return nil
}

// deployedOnce reports whether a revision of the history is (or was) deployed:
// then Helm can upgrade, even from a failed latest revision.
func deployedOnce(hist []*release.Release) bool {
	for _, r := range hist {
		switch r.Info.Status {
		case release.StatusDeployed, release.StatusSuperseded:
			return true
		}
	}
	return false
}

func timeout(t time.Duration) time.Duration {
	if t <= 0 {
		return 5 * time.Minute
	}
	return t
}

func (c *Client) install(ctx context.Context, s Spec, replace bool) (*release.Release, error) {
	in := action.NewInstall(c.cfg)
	in.ReleaseName, in.Namespace = s.Name, s.Namespace
	in.Timeout = timeout(s.Timeout)
	// Replace re-uses the name of a failed or uninstalled release (its
	// objects, annotated for this release, are adopted).
	in.Replace = replace
	rel, err := in.RunWithContext(ctx, s.Chart, s.Values)
	if err != nil {
		return rel, fmt.Errorf("helm install %s/%s: %w", s.Namespace, s.Name, err)
	}
	return rel, nil
}

func (c *Client) upgrade(ctx context.Context, s Spec) (*release.Release, error) {
	up := action.NewUpgrade(c.cfg)
	up.Namespace = s.Namespace
	up.Timeout = timeout(s.Timeout)
	up.MaxHistory = MaxHistory
	// Exactly the spec's values: without this Helm keeps the old values
	// when the new ones are empty.
	up.ResetValues = true
	rel, err := up.RunWithContext(ctx, s.Name, s.Chart, s.Values)
	if err != nil {
		return rel, fmt.Errorf("helm upgrade %s/%s: %w", s.Namespace, s.Name, err)
	}
	return rel, nil
}

// Uninstall removes the release and its history, and reports whether there
// was one; a missing release is not an error.
func (c *Client) Uninstall(ctx context.Context, name string, t time.Duration) (bool, error) {
	c.begin()
	ok, err := c.uninstall(ctx, name, t)
	return ok, c.interrupted(err)
}

func (c *Client) uninstall(_ context.Context, name string, t time.Duration) (bool, error) {
	un := action.NewUninstall(c.cfg)
	un.IgnoreNotFound = true
	un.Timeout = timeout(t)
	res, err := un.Run(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("helm uninstall %s/%s: %w", c.ns, name, c.withCause(err))
	}
	return res != nil && res.Release != nil, nil
}
