package remotefence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	// Namespace holds the epoch ConfigMap in the remote cluster.
	Namespace = "clustershard-system"
	// ConfigMapName is the ConfigMap whose data[cluster] is the current
	// ownership epoch of each RemoteCluster, the policy's parameter.
	ConfigMapName = "clustershard-fence"
	// Policy names the ValidatingAdmissionPolicy and its binding.
	Policy = "clustershard-fence"
	// ExtraKey is the user extra that carries a request's epoch.
	ExtraKey = "clustershard.io/fence-epoch"
	// ClusterKey is the user extra that names the request's RemoteCluster.
	ClusterKey = "clustershard.io/fence-cluster"
	// FieldManager owns the policy and binding.
	FieldManager = "clustershard-fence"
)

// Reasons the fence is not enforced in a cluster (Epoch.Reason).
const (
	// ReasonPolicyUnavailable: the remote API server has no
	// ValidatingAdmissionPolicy API (Kubernetes before 1.30).
	ReasonPolicyUnavailable = "PolicyUnavailable"
	// ReasonPolicyForbidden: the kubeconfig may not write admission policies.
	ReasonPolicyForbidden = "PolicyForbidden"
	// ReasonImpersonationForbidden: the kubeconfig's user may not
	// impersonate itself with the epoch extra.
	ReasonImpersonationForbidden = "ImpersonationForbidden"
	// ReasonEpochForbidden: the kubeconfig may not read or write the epoch
	// ConfigMap (or its namespace), or ask who it is.
	ReasonEpochForbidden = "EpochForbidden"
	// ReasonNotEnforced: the policy is in place but the server did not
	// refuse a write of the previous epoch within the wait (admission
	// plugin disabled, or a server that never saw the policy).
	ReasonNotEnforced = "NotEnforced"
	// ReasonEnforced: the fence holds.
	ReasonEnforced = "Enforced"
)

// Epoch is the outcome of Raise: the epoch this owner writes with, or why
// the remote API server does not enforce one.
type Epoch struct {
	// Value is the epoch raised to; 0 when not Enforced.
	Value int64
	// Enforced is true when the remote API server refuses earlier epochs.
	Enforced bool
	// Reason (one of the Reason constants) and Message explain Enforced.
	Reason, Message string
	// user is who requests impersonate: the kubeconfig's own user.
	user    authenticationv1.UserInfo
	cluster string
}

// Config returns cfg with every request carrying the epoch (impersonating
// the kubeconfig's own user and groups, with ExtraKey), or cfg unchanged
// when the fence is not enforced.
func (e Epoch) Config(cfg *rest.Config) *rest.Config {
	if !e.Enforced || carryNoEpoch {
		return cfg
	}
	return withEpoch(cfg, e.user, e.cluster, e.Value)
}

// withEpoch returns a copy of cfg impersonating user with cluster and epoch.
func withEpoch(cfg *rest.Config, user authenticationv1.UserInfo, cluster string, epoch int64) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	var groups []string
	for _, g := range user.Groups {
		// Added by the API server to every impersonated user; asking for it
		// would need one more permission.
		if g != "system:authenticated" {
			groups = append(groups, g)
		}
	}
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: user.Username,
		Groups:   groups,
		Extra:    map[string][]string{ExtraKey: {strconv.FormatInt(epoch, 10)}, ClusterKey: {cluster}},
	}
	return cfg
}

// Options tune Raise.
type Options struct {
	// Cluster is the RemoteCluster whose epoch is raised (a ConfigMap key:
	// a DNS subdomain name).
	Cluster string
	// EnforceWait bounds how long Raise waits for the server to refuse the
	// previous epoch (its admission caches follow the policy and the
	// ConfigMap). Default 10s.
	EnforceWait time.Duration
	// Memo and Key, when set, let Raise skip what an earlier Raise with the
	// same Key (the kubeconfig's hash: one API server, one set of
	// credentials) learnt; see Memo.
	Memo *Memo
	Key  string
}

// memoWait bounds the enforcement check of a raise that trusted its Memo:
// past it, the policy is assumed gone and the raise starts again in full.
const memoWait = time.Second

// Raise starts a new ownership epoch in the remote cluster cfg reaches
// (cfg's writes must already pass the replica's own fence): it applies the
// policy, raises the epoch and waits until the server refuses the previous
// one. It returns an Epoch that is not Enforced, with the reason, when the
// server cannot enforce it (the caller works unfenced and says so), and an
// error when the cluster could not be asked (retry later).
//
// Falling back to this replica's fence alone is refused once the cluster
// has an epoch in the remote (the rights were revoked, the policy removed):
// earlier owners' writes that carry it would still be admitted, so Raise
// returns an error and nothing is written until an epoch can be raised (or
// the epoch is deleted by hand).
func Raise(ctx context.Context, cfg *rest.Config, o Options) (Epoch, error) {
	if o.EnforceWait == 0 {
		o.EnforceWait = 10 * time.Second
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Epoch{}, err
	}
	if user, ok := o.Memo.get(o.Key); ok {
		e, err := raiseKnown(ctx, cfg, kube, o, user)
		if err == nil {
			return e, nil
		}
		o.Memo.Forget(o.Key) // the policy or namespace went away: from the start
	}
	e, err := raise(ctx, cfg, kube, o)
	if err != nil || e.Enforced {
		return e, err
	}
	if cur, ok, gerr := current(ctx, kube, o.Cluster); gerr == nil && ok {
		return Epoch{}, fmt.Errorf("cluster %s has ownership epoch %d in the remote API server, but it cannot be raised (%s: %s); "+
			"writing without it would let earlier owners' late writes in, so nothing is written until it can (delete the key %q of ConfigMap %s/%s to run without the remote fence)",
			o.Cluster, cur, e.Reason, e.Message, o.Cluster, Namespace, ConfigMapName)
	}
	return e, nil
}

// raise is Raise without the check of an existing epoch.
func raise(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, o Options) (Epoch, error) {
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if apierrors.IsForbidden(err) {
		return unenforced(ReasonEpochForbidden, "the kubeconfig may not ask who it is (create selfsubjectreviews): %v", err), nil
	}
	if err != nil {
		return Epoch{}, fmt.Errorf("ask the remote API server who the kubeconfig's user is: %w", err)
	}
	user := review.Status.UserInfo
	if out, err := applyPolicy(ctx, kube); err != nil || out.Reason != "" {
		return out, err
	}
	if err := ensureNamespace(ctx, kube); apierrors.IsForbidden(err) {
		return unenforced(ReasonEpochForbidden, "%v", err), nil
	} else if err != nil {
		return Epoch{}, err
	}
	epoch, err := bump(ctx, cfg, kube, user, o.Cluster)
	var ierr *impersonationError
	if errors.As(err, &ierr) {
		return unenforced(ReasonImpersonationForbidden, "the kubeconfig's user %q may not impersonate itself with the fence's user extras (RBAC verb impersonate on its user, its groups, userextras/%s and userextras/%s): %v",
			user.Username, ExtraKey, ClusterKey, ierr.err), nil
	}
	if apierrors.IsForbidden(err) {
		return unenforced(ReasonEpochForbidden, "the kubeconfig may not read or write the ConfigMap %s/%s: %v", Namespace, ConfigMapName, err), nil
	}
	if err != nil {
		return Epoch{}, err
	}
	if err := awaitEnforced(ctx, cfg, user, o.Cluster, epoch, o.EnforceWait); err != nil {
		if errors.Is(err, errNotEnforced) {
			return unenforced(ReasonNotEnforced, "%v", err), nil
		}
		return Epoch{}, err
	}
	o.Memo.put(o.Key, user)
	return enforced(user, o.Cluster, epoch), nil
}

// raiseKnown is raise for a user an earlier raise learnt, in a server where
// it found the namespace: it checks the policy (reads: an admission cache
// may still enforce a policy just deleted, so the check alone cannot tell),
// raises the epoch and checks, for at most memoWait, that it is enforced.
// Any failure is returned for a raise from the start.
func raiseKnown(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, o Options, user authenticationv1.UserInfo) (Epoch, error) {
	if out, err := applyPolicy(ctx, kube); err != nil || out.Reason != "" {
		return Epoch{}, errors.Join(err, errors.New(out.Message))
	}
	epoch, err := bump(ctx, cfg, kube, user, o.Cluster)
	if err != nil {
		return Epoch{}, err
	}
	if err := awaitEnforced(ctx, cfg, user, o.Cluster, epoch, min(memoWait, o.EnforceWait)); err != nil {
		return Epoch{}, err
	}
	return enforced(user, o.Cluster, epoch), nil
}

func enforced(user authenticationv1.UserInfo, cluster string, epoch int64) Epoch {
	return Epoch{Value: epoch, Enforced: true, Reason: ReasonEnforced, user: user, cluster: cluster,
		Message: fmt.Sprintf("the remote API server refuses writes of earlier owners (epoch %d, policy %s)", epoch, Policy)}
}

// ensureNamespace creates Namespace if it is missing.
func ensureNamespace(ctx context.Context, kube kubernetes.Interface) error {
	_, err := kube.CoreV1().Namespaces().Get(ctx, Namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("ensure namespace %s: %w", Namespace, err)
	}
	return nil
}

func unenforced(reason, format string, args ...any) Epoch {
	return Epoch{Reason: reason, Message: "writes are fenced by this replica only: " + fmt.Sprintf(format, args...)}
}

var errNotEnforced = errors.New("not enforced")

// impersonationError is the server refusing the impersonation itself.
type impersonationError struct{ err error }

func (e *impersonationError) Error() string { return "impersonation refused: " + e.err.Error() }

// User is the user the epoch's requests impersonate (the kubeconfig's own
// user), "" when the epoch is not enforced.
func (e Epoch) User() string {
	if !e.Enforced {
		return ""
	}
	return e.user.Username
}
