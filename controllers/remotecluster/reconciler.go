package remotecluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/helmrelease"
	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/internal/remote"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/internal/remotefence"
	"github.com/clustershard/clustershard/registry"
)

const (
	// ControllerName names the controller and its event recorder.
	ControllerName = "remotecluster"
)

// Ownership is what the controller needs from the shard coordinator.
type Ownership interface {
	// Owns reports whether this replica owns the cluster now.
	Owns(cluster string) bool
	// WithOwnership runs f while this replica owns the cluster.
	WithOwnership(cluster string, f func() error) error
	// Holds reports whether this replica still holds the cluster while it
	// may not write for it (a membership renewal answered late, within
	// its grace): the controller looks again after HeldRetry and writes
	// nothing meanwhile.
	Holds(cluster string) bool
	HeldRetry() time.Duration
	// Holder returns the replica that holds the cluster's Lease and since
	// when, as the coordinator last saw it.
	Holder(cluster string) (holder string, since time.Time, ok bool)
	// WriteDeadline is the fence every remote write passes.
	WriteDeadline(cluster string) (time.Time, error)
	// Placement explains how the ring applied the cluster's spec.placement;
	// "" when it placed the cluster freely.
	Placement(cluster string) string
}

// Registry is what the controller needs from the registry of remote
// managers (*registry.Registry).
type Registry interface {
	// Spawn starts the cluster's remote manager.
	Spawn(cluster string, cfg *rest.Config, opts ...registry.SpawnOption) error
	// Stop stops it and waits for it, bounded by ctx.
	Stop(ctx context.Context, cluster string) error
	// Get returns the state of the cluster's remote manager.
	Get(cluster string) (registry.Info, bool)
	// WithClient runs f with the cluster's remote client while its manager
	// runs.
	WithClient(cluster string, f func(client.Client) error) error
}

// Reconciler reconciles RemoteClusters owned by this replica.
type Reconciler struct {
	// Client is the management cluster's client.
	Client client.Client
	// Scheme builds remote clients for installs.
	Scheme *runtime.Scheme
	// Registry runs the remote managers.
	Registry Registry
	// Ownership is the shard coordinator.
	Ownership Ownership
	// Identity is this replica's name, written to status.owner.
	Identity string
	// Holder is this process's holder identity (shard.HolderIdentity),
	// carried by the User-Agent of remote requests; default Identity.
	Holder string
	// Recorder emits Events on RemoteClusters.
	Recorder events.EventRecorder
	// KubeConfig shapes the rest.Config of remote clusters.
	KubeConfig remote.Options
	// SecretNamespaces are the namespaces kubeconfig Secrets may live in
	// (the replica passes --kubeconfig-secret-namespaces, by default its
	// own namespace). A RemoteCluster naming a Secret elsewhere is refused
	// and nothing is read; empty refuses every Secret.
	SecretNamespaces []string
	// Kinds are the replicated kinds, whose CRDs spec.install copies.
	Kinds []remotecopy.Kind
	// ProbeTimeout bounds the /version probe before a spawn (default 5s).
	ProbeTimeout time.Duration
	// StopTimeout bounds the stop of a remote manager this controller
	// stops itself (a changed kubeconfig, a superseded epoch, a deleted
	// RemoteCluster); the replica passes --stop-timeout. Zero: bounded by
	// the reconcile's context only.
	StopTimeout time.Duration
	// InstallTimeout bounds each wait of spec.install: for copied CRDs to
	// be established, and for the remote fence's policy to be enforced
	// (default DefaultInstallTimeout).
	InstallTimeout time.Duration
	// HelmTimeout bounds a Helm install, upgrade or uninstall of
	// spec.install.helm, hooks included (default DefaultHelmTimeout).
	HelmTimeout time.Duration
	// Resync re-reconciles owned clusters periodically (default
	// DefaultResync).
	Resync time.Duration
	// CleanupTimeout bounds how long a deleted RemoteCluster with
	// cleanupPolicy Delete retries its remote cleanup (say its kubeconfig
	// Secret was deleted first, or the cluster is gone): past it the
	// RemoteCluster is let go without it, naming what was left behind
	// (default DefaultCleanupTimeout).
	CleanupTimeout time.Duration
	// Workers is how many clusters reconcile at once (DefaultWorkers if 0).
	Workers int
	// Charts fetches and caches the charts of spec.install.helm.
	Charts *helmrelease.Charts
	// Enqueue reconciles a cluster again soon (a chart fetch ended).
	Enqueue func(cluster string)

	mu        sync.Mutex
	spawned   map[string]string    // cluster -> kubeconfig hash of the running manager
	installed map[string]installed // cluster -> last spec.install ensured while running
	epochs    map[string]remotefence.Epoch
	rotations map[string]rotation // cluster -> how its running manager's credentials rotate
	// fenceMemo is what raising epochs learnt per kubeconfig (its user,
	// the policy in place), so the next owner period raises faster.
	fenceMemo remotefence.Memo
}

// Reconcile brings one RemoteCluster to its desired state if this replica owns it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var rc v1alpha1.RemoteCluster
	if err := r.Client.Get(ctx, req.NamespacedName, &rc); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.stop(ctx, req.Name)
		}
		return ctrl.Result{}, err
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("cluster", rc.Name))
	if !r.Ownership.Owns(rc.Name) && r.Ownership.Holds(rc.Name) {
		// Held, its writes fenced for a moment (a renewal answered late):
		// nothing to write, nothing to forget.
		return ctrl.Result{RequeueAfter: r.Ownership.HeldRetry()}, nil
	}
	if !r.Ownership.Owns(rc.Name) {
		// Another replica owns it (or nobody yet). The coordinator re-enqueues
		// it when acquired; the slow resync covers a missed notification.
		r.forgetEpoch(rc.Name)
		return ctrl.Result{RequeueAfter: r.resync()}, nil
	}
	if !rc.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &rc)
	}
	if !controllerutil.ContainsFinalizer(&rc, v1alpha1.RemoteClusterFinalizer) {
		before := rc.DeepCopy()
		controllerutil.AddFinalizer(&rc, v1alpha1.RemoteClusterFinalizer)
		if err := r.owned(rc.Name, func() error {
			return r.Client.Patch(ctx, &rc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		}); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	before := rc.DeepCopy()
	err := r.ensure(ctx, &rc)
	r.ownedStatus(&rc)
	heartbeat(before, &rc, time.Now())
	if !equality.Semantic.DeepEqual(before.Status, rc.Status) {
		if perr := r.owned(rc.Name, func() error {
			// Optimistic lock: a status computed from a stale cache must not
			// replace newer conditions (a merge patch replaces the whole list).
			return r.Client.Status().Patch(ctx, &rc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		}); perr != nil {
			// Retried even when ensure's error was terminal: a status that
			// did not land must be written again, or the RemoteCluster would
			// go on showing the state it had before.
			if err != nil {
				err = fmt.Errorf("update status: %w (after: %s)", perr, err.Error()) // ensure's error is not wrapped: it may be terminal
			} else {
				err = fmt.Errorf("update status: %w", perr)
			}
		}
	}
	if err != nil {
		return ctrl.Result{}, err // retried with backoff
	}
	return ctrl.Result{RequeueAfter: r.resync()}, nil
}

// HeartbeatInterval is the longest the owner leaves status.lastHeartbeatTime
// unchanged while nothing else in status changes: one write per cluster per
// interval at most, so a fleet of 1,000 clusters costs about 3 writes/s.
const HeartbeatInterval = 5 * time.Minute

// heartbeat stamps rc's status with now when it is written anyway (it
// differs from before) or when the last stamp is older than
// HeartbeatInterval.
func heartbeat(before, rc *v1alpha1.RemoteCluster, now time.Time) {
	last := rc.Status.LastHeartbeatTime
	if equality.Semantic.DeepEqual(before.Status, rc.Status) && last != nil && now.Sub(last.Time) < HeartbeatInterval {
		return
	}
	t := metav1.NewTime(now.Truncate(time.Second))
	rc.Status.LastHeartbeatTime = &t
}

func (r *Reconciler) resync() time.Duration {
	if r.Resync == 0 {
		return DefaultResync
	}
	return r.Resync
}

// owned runs a management write for a cluster only while this replica owns it.
func (r *Reconciler) owned(cluster string, f func() error) error {
	return r.Ownership.WithOwnership(cluster, f)
}

// ownedStatus fills owner, incarnation, epoch, placement, Owned and the
// hand-over time.
func (r *Reconciler) ownedStatus(rc *v1alpha1.RemoteCluster) {
	rc.Status.Owner, rc.Status.OwnerIncarnation = r.Identity, r.Holder
	rc.Status.ObservedGeneration = rc.Generation
	rc.Status.OwnershipEpoch = r.epoch(rc.Name)
	rc.Status.Placement = r.Ownership.Placement(rc.Name)
	if holder, since, ok := r.Ownership.Holder(rc.Name); ok && holder == r.Identity && !since.IsZero() {
		t := metav1.NewTime(since.Truncate(time.Second))
		rc.Status.LastHandoverTime = &t
	}
	r.setCondition(rc, v1alpha1.ConditionOwned, true, v1alpha1.ReasonLeaseHeld, "Lease held by "+r.Identity)
}

func (r *Reconciler) setCondition(rc *v1alpha1.RemoteCluster, typ string, ok bool, reason, msg string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&rc.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: rc.Generation,
	})
}

// fail records a failure three ways: a Warning event, a condition (plus
// Ready=False) and the returned error.
func (r *Reconciler) fail(rc *v1alpha1.RemoteCluster, typ, reason string, err error) error {
	r.setCondition(rc, typ, false, reason, err.Error())
	if typ != v1alpha1.ConditionReady {
		r.setCondition(rc, v1alpha1.ConditionReady, false, reason, err.Error())
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(rc, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", err.Error())
	}
	return err
}

// ensure reads the kubeconfig, probes, installs and spawns.
func (r *Reconciler) ensure(ctx context.Context, rc *v1alpha1.RemoteCluster) error {
	content, err := r.readKubeConfig(ctx, rc)
	if err != nil {
		return err
	}
	cfg, err := r.parseKubeConfig(content, rc.Name)
	if err != nil {
		reason := v1alpha1.ReasonKubeConfigMalformed
		if kerr, ok := errors.AsType[*remote.Error](err); ok {
			reason = kerr.Reason
		}
		_ = r.stop(ctx, rc.Name)
		// Only a change of the Secret can fix this: no retry loop.
		return reconcile.TerminalError(r.fail(rc, v1alpha1.ConditionConnected, reason, err))
	}
	hash := remote.Hash(content)
	if running, ok := r.runningHash(rc.Name); ok && running != hash {
		if rotated, why := r.rotate(ctx, rc, cfg, hash); !rotated {
			log.FromContext(ctx).Info("Kubeconfig changed: restarting the remote manager", "why", why)
			metrics.CredentialRotations.WithLabelValues("restart").Inc()
			if err := r.stop(ctx, rc.Name); err != nil {
				return r.fail(rc, v1alpha1.ConditionReady, v1alpha1.ReasonSpawnFailed, fmt.Errorf("stop the manager for the new kubeconfig: %w", err))
			}
		}
	}
	info, running := r.Registry.Get(rc.Name)
	if running && info.State == registry.StateStopping {
		// Stopped on a loss that has not finished: nothing of this
		// ownership period may reuse it (its epoch, its install).
		return fmt.Errorf("the remote manager of %s is still stopping", rc.Name)
	}
	// A remote API server that fails its probes would only make the remote
	// calls below (the epoch check, installs, Helm checks) wait out their
	// timeouts, holding a worker and delaying Connected=False by as much:
	// skip them until it answers again (the registry's state change
	// reconciles the cluster then).
	unhealthy := running && info.State == registry.StateUnhealthy
	if running && !unhealthy && r.superseded(ctx, rc, cfg) {
		if err := r.stop(ctx, rc.Name); err != nil {
			return r.fail(rc, v1alpha1.ConditionReady, v1alpha1.ReasonSpawnFailed, fmt.Errorf("stop the manager of a superseded epoch: %w", err))
		}
		return fmt.Errorf("the ownership epoch of %s was superseded in the remote cluster; raising a new one", rc.Name)
	}
	if running && info.State == registry.StateFailed {
		_ = r.stop(ctx, rc.Name)
		return r.fail(rc, v1alpha1.ConditionReady, v1alpha1.ReasonManagerFailed, fmt.Errorf("remote manager failed, restarting: %w", info.Err))
	}
	key := installKey(rc, hash)
	var installErr error
	if !running {
		step := time.Now()
		version, err := probe(ctx, cfg, r.probeTimeout())
		step = observeStep(metrics.SpawnProbe, step)
		if err != nil {
			return r.fail(rc, v1alpha1.ConditionConnected, v1alpha1.ReasonUnreachable, fmt.Errorf("remote API server unreachable: %w", err))
		}
		rc.Status.ServerVersion = version
		r.setCondition(rc, v1alpha1.ConditionConnected, true, v1alpha1.ReasonReachable, "Remote API server "+version+" answered")
		// A new manager is a new epoch: raised before any other remote
		// write of this replica, so the remote refuses earlier owners'.
		epoch, err := r.raiseEpoch(ctx, rc, cfg, hash)
		step = observeStep(metrics.SpawnEpoch, step)
		if err != nil {
			return err
		}
		parsed := cfg
		cfg = epoch.Config(cfg)
		err = r.install(ctx, rc, cfg)
		step = observeStep(metrics.SpawnInstall, step)
		if err != nil {
			if errors.Is(err, errChartPending) {
				// Spawned once the chart is there: the fetch re-enqueues.
				r.setCondition(rc, v1alpha1.ConditionInstalled, false, v1alpha1.ReasonChartPending, err.Error())
				r.setCondition(rc, v1alpha1.ConditionReady, false, v1alpha1.ReasonChartPending, "waiting for the chart of spec.install.helm")
				return nil
			}
			return r.fail(rc, v1alpha1.ConditionInstalled, installFailure(err), err)
		}
		spawnCfg := r.rotatable(rc.Name, parsed, cfg, epoch.User())
		err = r.owned(rc.Name, func() error {
			err := r.Registry.Spawn(rc.Name, spawnCfg, registry.WithNamespaces(rc.Spec.Namespaces...))
			if errors.Is(err, registry.ErrAlreadyExist) {
				return nil
			}
			return err
		})
		observeStep(metrics.SpawnStart, step)
		if err != nil {
			return r.fail(rc, v1alpha1.ConditionReady, v1alpha1.ReasonSpawnFailed, fmt.Errorf("spawn the remote manager: %w", err))
		}
		r.setRunningHash(rc.Name, hash)
		r.setInstalled(rc, key)
		info, _ = r.Registry.Get(rc.Name)
	} else if unhealthy {
		if changed, _ := r.installDue(rc, key); changed {
			r.setCondition(rc, v1alpha1.ConditionInstalled, false, v1alpha1.ReasonInstallPending, "spec.install changed while the remote API server does not answer; it is installed once it answers again")
		} else {
			r.restoreInstalled(rc)
		}
	} else if changed, helmDue := r.installDue(rc, key); changed || helmDue {
		cfg = r.epochConfig(rc.Name, cfg)
		// spec.install changed while the manager runs: ensure all of it
		// again; or the periodic check of the Helm release is due (a
		// release removed or broken by hand is repaired). The manager
		// keeps running either way.
		var err error
		if changed {
			err = r.install(ctx, rc, cfg)
		} else {
			err = r.recheckHelm(ctx, rc, cfg)
		}
		switch {
		case errors.Is(err, errChartPending):
			r.setCondition(rc, v1alpha1.ConditionInstalled, false, v1alpha1.ReasonChartPending, err.Error())
		case err != nil:
			// Reported after the manager's state below: it still runs.
			r.setCondition(rc, v1alpha1.ConditionInstalled, false, installFailure(err), err.Error())
			r.event(rc, corev1.EventTypeWarning, installFailure(err), "%s", err.Error())
			installErr = err
		default:
			r.setInstalled(rc, key)
		}
	} else {
		r.restoreInstalled(rc)
	}
	r.restoreFenced(rc)
	rc.Status.KubeConfigHash = hash
	switch info.State {
	case registry.StateRunning:
		if info.ServerVersion != "" {
			rc.Status.ServerVersion = info.ServerVersion
		}
		r.setCondition(rc, v1alpha1.ConditionConnected, true, v1alpha1.ReasonReachable, "Remote API server answers")
		r.setCondition(rc, v1alpha1.ConditionReady, true, v1alpha1.ReasonManagerRunning, "Remote manager runs on "+r.Identity)
	case registry.StateUnhealthy:
		return errors.Join(installErr, r.fail(rc, v1alpha1.ConditionConnected, v1alpha1.ReasonUnreachable, fmt.Errorf("remote API server unreachable: %w", info.Err)))
	default:
		return errors.Join(installErr, r.fail(rc, v1alpha1.ConditionReady, v1alpha1.ReasonNotConnected, fmt.Errorf("remote manager is %s", info.State)))
	}
	return installErr
}

// observeStep records a step of a spawn that began at began and returns now,
// when the next step begins.
func observeStep(step string, began time.Time) time.Time {
	now := time.Now()
	metrics.SpawnStepDuration.WithLabelValues(step).Observe(now.Sub(began).Seconds())
	return now
}
