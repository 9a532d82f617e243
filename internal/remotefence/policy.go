package remotefence

import (
	"context"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	admissionv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/kubernetes"
)

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

func labels() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "clustershard", versionLabel: policyVersion}
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

// versionLabel carries policyVersion on the policy and binding; a change
// of either's spec must change policyVersion.
const (
	versionLabel  = "clustershard.io/fence-version"
	policyVersion = "4"
)
