package registry

import (
	"errors"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/fx"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Fence tells whether this replica may still write to a remote cluster. The
// shard coordinator implements it; the registry consults it before every write
// of a remote client.
type Fence interface {
	// WriteDeadline returns the instant, on the local monotonic clock, until
	// which a write to cluster may be sent, or an error if it may not be sent
	// at all. A zero time means no deadline.
	WriteDeadline(cluster string) (time.Time, error)
}

// RenewingFence is implemented by a Fence whose deadlines move forward while
// ownership lasts (the shard coordinator's: each membership renewal extends
// them). The fenced transport then lets a write run past the deadline it
// started with, for as long as WriteDeadline keeps extending it, and cuts it
// once it does not (a lapse, a loss, a hand-over). WriteBound is the latest
// instant by which the remote API server must have finished a write sent now
// (its server-side timeout): no later than the earliest moment another
// replica could own the cluster if this one's authority ended at once.
type RenewingFence interface {
	Fence
	WriteBound(cluster string) (time.Time, error)
}

// WriteTracker is implemented by a Fence that must know which writes it
// admitted may still land. WriteBegan is called for each write before its
// fence check, so a hand-over that made the fence refuse new writes and then
// asks whether any are in flight cannot miss one; the function it returns is
// called once when the write ended, with the zero time when it cannot land
// any more (answered, refused by the fence, or never sent), or with the
// instant until which the remote API server may still process it (sent, no
// answer: cut at the fence deadline, a broken or black-holed connection, or
// a 500/504 timeout answer). The shard coordinator abandons a Lease instead
// of releasing it while a write of its cluster is in flight or in doubt.
type WriteTracker interface {
	WriteBegan(cluster string) (ended func(doubtUntil time.Time))
}

// Options configure a Registry. ManageClient and Scheme are required.
type Options struct {
	// ManageClient is the management cluster's client, given to remote
	// modules as the client.Client named "manage-client".
	ManageClient client.Client
	// ManageReader reads the management cluster from its API server (say
	// the manager's APIReader), given to remote modules as the client.Reader
	// named "manage-reader"; ManageClient when nil.
	ManageReader client.Reader
	// Scheme is the scheme of the remote managers and clients.
	Scheme *runtime.Scheme
	// RemoteModules are added to every remote fx app: this is how remote
	// reconcilers are registered.
	RemoteModules []fx.Option
	// Logger is the parent logger; each cluster logs with a "cluster" value.
	Logger logr.Logger

	// SharedControllerNames makes Naming give remote controllers the same
	// name in every cluster (bounded metric labels for very large fleets).
	SharedControllerNames bool
	// QPS and Burst limit each remote client (defaults 20 and 40).
	QPS   float32
	Burst int
	// StartTimeout bounds the start of a remote fx app (default 30s).
	StartTimeout time.Duration
	// StopGrace is how long a stopping remote manager waits for its
	// controllers to finish (controller-runtime's graceful shutdown;
	// default 10s).
	StopGrace time.Duration

	// ProbeInterval is how often a running cluster's /version is probed
	// (default 10s); ProbeTimeout bounds one probe (default 5s); after
	// ProbeFailureThreshold failures in a row (default 3) the cluster is
	// reported Unhealthy, and Running again after the next success.
	ProbeInterval         time.Duration
	ProbeTimeout          time.Duration
	ProbeFailureThreshold int

	// Fence, when set, is checked before every remote write.
	Fence Fence
	// OnEvent, when set, is called on every state change of an entry. It is
	// called without registry locks held and must not block for long.
	OnEvent func(Event)
}

// Defaults of Options, also the defaults of the replica's flags.
const (
	DefaultQPS                   = 20
	DefaultBurst                 = 40
	DefaultStartTimeout          = 30 * time.Second
	DefaultStopGrace             = 10 * time.Second
	DefaultProbeInterval         = 10 * time.Second
	DefaultProbeTimeout          = 5 * time.Second
	DefaultProbeFailureThreshold = 3
)

func (o *Options) defaults() error {
	if o.ManageClient == nil {
		return errors.New("registry: ManageClient is required")
	}
	if o.Scheme == nil {
		return errors.New("registry: Scheme is required")
	}
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.StopGrace == 0 {
		o.StopGrace = DefaultStopGrace
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = DefaultProbeInterval
	}
	if o.ProbeTimeout == 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.ProbeFailureThreshold == 0 {
		o.ProbeFailureThreshold = DefaultProbeFailureThreshold
	}
	return nil
}

// SpawnOption configures one Spawn.
type SpawnOption func(*spawnOptions)

type spawnOptions struct {
	namespaces []string
}

// WithNamespaces restricts the remote manager's cache to namespaces.
func WithNamespaces(namespaces ...string) SpawnOption {
	return func(o *spawnOptions) { o.namespaces = append(o.namespaces, namespaces...) }
}
