// Package remotefence makes a remote API server enforce who may write for
// a cluster, with a fencing token it checks on receipt.
//
// The replicas' own fence (registry.FencedConfig) stops a write from being
// sent once authority has ended and bounds it by a server-side timeout, but
// a timeout counts from when the server receives the request. A write sent
// in time and held on the way (a proxy or load balancer that buffers, a
// network that stalls and heals) can still land after its writer lost the
// cluster and another replica took it. Only the remote server can refuse
// it, so it is told the current ownership epoch:
//
//   - a ValidatingAdmissionPolicy (Policy) refuses every create, update
//     and delete that carries a cluster and an epoch (the user extras
//     ClusterKey and ExtraKey, sent by impersonating the kubeconfig's own
//     user) lower than that cluster's epoch in a ConfigMap
//     (Namespace/ConfigMapName, one key per RemoteCluster: several
//     RemoteClusters, owned by different replicas, may name one API server);
//   - each time a replica starts working on a cluster (Raise), before its
//     first write of that epoch, it raises the cluster's epoch by one with
//     a resourceVersion precondition, and checks with a dry run that the
//     server already refuses the previous epoch;
//   - every request of that epoch carries the new epoch (Epoch.Config).
//
// So a write of an earlier epoch that arrives after the next owner raised
// the epoch is refused by the remote API server before anything is stored,
// however late it arrives. Requests without the extra (other users, and
// clusters where the fence is unavailable) are not affected.
package remotefence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	admissionv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
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
	if !e.Enforced {
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
}

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

// Current returns the epoch of cluster in the remote API server cfg
// reaches, and whether it has one.
func Current(ctx context.Context, cfg *rest.Config, cluster string) (int64, bool, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, false, err
	}
	return current(ctx, kube, cluster)
}

func current(ctx context.Context, kube kubernetes.Interface, cluster string) (int64, bool, error) {
	cm, err := kube.CoreV1().ConfigMaps(Namespace).Get(ctx, ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	v, ok := cm.Data[cluster]
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("epoch %q of cluster %s is not a number", v, cluster)
	}
	return n, true, nil
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
	return Epoch{Value: epoch, Enforced: true, Reason: ReasonEnforced, user: user, cluster: o.Cluster,
		Message: fmt.Sprintf("the remote API server refuses writes of earlier owners (epoch %d, policy %s)", epoch, Policy)}, nil
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

// applyPolicy applies the policy and its binding, unless both are there at
// this version already (so a take-over writes nothing but the epoch); a
// server without the API, or a user who may not write it, gives an
// unenforced Epoch.
func applyPolicy(ctx context.Context, kube kubernetes.Interface) (Epoch, error) {
	adm := kube.AdmissionregistrationV1()
	p, perr := adm.ValidatingAdmissionPolicies().Get(ctx, Policy, metav1.GetOptions{})
	b, berr := adm.ValidatingAdmissionPolicyBindings().Get(ctx, Policy, metav1.GetOptions{})
	if perr == nil && berr == nil && p.Labels[versionLabel] == policyVersion && b.Labels[versionLabel] == policyVersion {
		return Epoch{}, nil
	}
	apply := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	_, err := adm.ValidatingAdmissionPolicies().Apply(ctx, policy(), apply)
	if err == nil {
		_, err = adm.ValidatingAdmissionPolicyBindings().Apply(ctx, binding(), apply)
	}
	switch {
	case err == nil:
		return Epoch{}, nil
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return unenforced(ReasonPolicyUnavailable, "the remote API server has no ValidatingAdmissionPolicy API (Kubernetes 1.30 or later): %v", err), nil
	case apierrors.IsForbidden(err):
		return unenforced(ReasonPolicyForbidden, "the kubeconfig may not write ValidatingAdmissionPolicies: %v", err), nil
	}
	return Epoch{}, fmt.Errorf("apply the fence policy: %w", err)
}

// versionLabel carries policyVersion on the policy and binding; a change
// of either's spec must change policyVersion.
const (
	versionLabel  = "clustershard.io/fence-version"
	policyVersion = "4"
)

func labels() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "clustershard", versionLabel: policyVersion}
}

// bump raises the cluster's epoch (creating the ConfigMap if needed). An
// existing key is raised by a JSON patch that first tests its value, so the
// owners of other clusters of the same API server, who write other keys of
// the same ConfigMap at the same time (after a crash, all of a replica's
// clusters move at once), never conflict with it; a new key is added with a
// resourceVersion precondition. Either way a raise of this cluster that
// raced with another is retried on a fresh read.
func bump(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, user authenticationv1.UserInfo, cluster string) (int64, error) {
	for attempt := 0; ; attempt++ {
		cm, err := kube.CoreV1().ConfigMaps(Namespace).Get(ctx, ConfigMapName, metav1.GetOptions{})
		var cur int64
		v, has := "", false
		switch {
		case apierrors.IsNotFound(err):
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: ConfigMapName}}
		case err != nil:
			return 0, fmt.Errorf("read the fence epoch: %w", err)
		default:
			if v, has = cm.Data[cluster]; has {
				if cur, err = strconv.ParseInt(v, 10, 64); err != nil || cur < 0 {
					cur = 0 // tampered with: the clock takes over below
				}
			}
		}
		// Never below the clock in milliseconds: an epoch whose ConfigMap or
		// key was deleted starts again above anything an earlier owner holds
		// (owners are a lease duration apart, far more than clock skew).
		next := max(cur+1, time.Now().UnixMilli())
		as, err := kubernetes.NewForConfig(withEpoch(cfg, user, cluster, next))
		if err != nil {
			return 0, err
		}
		cms := as.CoreV1().ConfigMaps(Namespace)
		switch {
		case has:
			var patch []byte
			patch, err = json.Marshal([]map[string]string{
				{"op": "test", "path": "/data/" + cluster, "value": v},
				{"op": "replace", "path": "/data/" + cluster, "value": strconv.FormatInt(next, 10)},
			})
			if err == nil {
				_, err = cms.Patch(ctx, ConfigMapName, types.JSONPatchType, patch, metav1.PatchOptions{})
			}
		case cm.ResourceVersion == "":
			cm.Data = map[string]string{cluster: strconv.FormatInt(next, 10)}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		default:
			cm = cm.DeepCopy()
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[cluster] = strconv.FormatInt(next, 10)
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		switch {
		case err == nil:
			return next, nil
		case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "impersonate"):
			return 0, &impersonationError{err: err}
		case (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) && attempt < 20:
			// Another raise won the race (a failed test op is answered
			// Invalid or BadRequest): read again.
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(time.Duration(rand.Int64N(int64(20*time.Millisecond)) + int64(attempt)*int64(10*time.Millisecond))):
			}
			continue
		}
		return 0, fmt.Errorf("raise the fence epoch of %s to %d: %w", cluster, next, err)
	}
}

// awaitEnforced waits until the server refuses a dry-run write of the
// epoch before epoch: its admission has seen the policy, the binding and
// the new epoch.
func awaitEnforced(ctx context.Context, cfg *rest.Config, user authenticationv1.UserInfo, cluster string, epoch int64, wait time.Duration) error {
	old, err := kubernetes.NewForConfig(withEpoch(cfg, user, cluster, epoch-1))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	for {
		cm, err := old.CoreV1().ConfigMaps(Namespace).Get(ctx, ConfigMapName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read the fence epoch: %w", err)
		}
		cm.Annotations = map[string]string{"clustershard.io/fence-check": strconv.FormatInt(epoch, 10)}
		cm.ResourceVersion = "" // unconditional: raises of other clusters must not make it conflict
		_, err = old.CoreV1().ConfigMaps(Namespace).Update(ctx, cm, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case IsFenced(err) && strings.Contains(err.Error(), movedOn):
			// The validation ran against an epoch above epoch-1.
			return nil
		case err != nil && !apierrors.IsConflict(err):
			return fmt.Errorf("check the fence: %w", err)
		case time.Now().After(deadline):
			return fmt.Errorf("%w: the remote API server still admits writes of epoch %d %v after the epoch was raised to %d (is the ValidatingAdmissionPolicy admission plugin enabled?)",
				errNotEnforced, epoch-1, wait, epoch)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// IsFenced reports whether err is the remote API server refusing a write by
// the fence policy: one of an earlier epoch.
func IsFenced(err error) bool {
	return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+Policy+"'")
}

// movedOn is in the message of a write refused for its earlier epoch.
const movedOn = "which has moved on to epoch"

// policy refuses writes that carry a cluster's epoch below the ConfigMap's.
func policy() *admissionv1ac.ValidatingAdmissionPolicyApplyConfiguration {
	return admissionv1ac.ValidatingAdmissionPolicy(Policy).
		WithLabels(labels()).
		// Ignore: the API server resolves the parameter before it evaluates
		// the match conditions, for every request; with Fail, a parameter
		// cache not yet synced (an API server starting) would refuse every
		// write in the cluster, the kubelet's and controllers' included. Only
		// a validation that evaluates to false refuses, and only requests
		// that carry an epoch get that far; a fence whose evaluation fails
		// lets writes through (Raise checked it works).
		WithSpec(admissionv1ac.ValidatingAdmissionPolicySpec().
			WithFailurePolicy(admissionregistrationv1.Ignore).
			WithParamKind(admissionv1ac.ParamKind().WithAPIVersion("v1").WithKind("ConfigMap")).
			WithMatchConstraints(admissionv1ac.MatchResources().WithResourceRules(
				admissionv1ac.NamedRuleWithOperations().
					WithOperations(admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete).
					WithAPIGroups("*").WithAPIVersions("*").WithResources("*/*"))).
			// Guarded with has(): a user without extras (the API server's own
			// controllers) must match nothing, and an error here would fail
			// their requests too.
			WithMatchConditions(admissionv1ac.MatchCondition().
				WithName("carries-an-epoch").
				WithExpression("has(request.userInfo.extra) && '"+ExtraKey+"' in request.userInfo.extra && '"+ClusterKey+"' in request.userInfo.extra")).
			WithVariables(
				admissionv1ac.Variable().WithName("cluster").WithExpression("request.userInfo.extra['"+ClusterKey+"'][0]"),
				admissionv1ac.Variable().WithName("epoch").WithExpression("request.userInfo.extra['"+ExtraKey+"'][0]"),
				admissionv1ac.Variable().WithName("current").WithExpression("has(params.data) && variables.cluster in params.data ? params.data[variables.cluster] : '0'"),
			).
			WithValidations(admissionv1ac.Validation().
				WithExpression("int(variables.epoch) >= int(variables.current)").
				WithMessageExpression("'fenced: this write carries ownership epoch ' + variables.epoch + ' of cluster ' + variables.cluster + ', which has moved on to epoch ' + variables.current").
				WithReason(metav1.StatusReasonForbidden)))
}

// binding binds the policy to the epoch ConfigMap. A missing ConfigMap
// turns the fence off rather than on: the API server resolves the parameter
// before it evaluates the match conditions, so Deny would refuse every write
// in the cluster, whoever makes it.
func binding() *admissionv1ac.ValidatingAdmissionPolicyBindingApplyConfiguration {
	return admissionv1ac.ValidatingAdmissionPolicyBinding(Policy).
		WithLabels(labels()).
		WithSpec(admissionv1ac.ValidatingAdmissionPolicyBindingSpec().
			WithPolicyName(Policy).
			WithValidationActions(admissionregistrationv1.Deny).
			WithParamRef(admissionv1ac.ParamRef().
				WithName(ConfigMapName).WithNamespace(Namespace).
				WithParameterNotFoundAction(admissionregistrationv1.AllowAction)))
}
