package replica_test

import (
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/test/testenv"
)

// A source whose RemoteCluster exists but that no replica can run (its
// Lease cannot be created: a ValidatingAdmissionPolicy refuses it) says so
// on the source once the grace has passed, and syncs once the Lease can be
// created.
func TestSourceOfAnUnownedClusterSaysSo(t *testing.T) {
	ctx := t.Context()
	r := startReplica(t, "nobody-0")
	eventually(t, 20*time.Second, "membership", func() bool { return r.Coordinator.Ready() })
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-lease-for-nobody-east"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"coordination.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"leases"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: `!has(object.metadata.annotations) || !('clustershard.io/cluster' in object.metadata.annotations) || object.metadata.annotations['clustershard.io/cluster'] != 'nobody-east'`,
				Message:    "the Lease of nobody-east is refused by the test",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-lease-for-nobody-east"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: policy.Name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The policy takes effect within a few seconds: wait until it refuses.
	probe := func() error {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.ControllerNamespace, GenerateName: "probe-",
			Annotations: map[string]string{v1alpha1.ClusterAnnotation: "nobody-east"}}}
		err := env.Client.Create(ctx, l, client.DryRunAll)
		return err
	}
	eventually(t, 20*time.Second, "the policy refuses the Lease", func() bool { return probe() != nil })
	lifted := false
	lift := func() {
		if !lifted {
			lifted = true
			for _, o := range []client.Object{binding, policy} {
				if err := env.Client.Delete(ctx, o); err != nil {
					t.Error(err)
				}
			}
		}
	}
	defer lift()
	remoteCluster(t, "nobody-east", 0)
	ensureNamespace(t, env.Client, "nobody-ns")
	if err := env.Client.Create(ctx, source("nobody-ns", "waiting", "nobody-east")); err != nil {
		t.Fatal(err)
	}
	reason := func() (string, string) {
		var s examplev1alpha1.ExampleChaos
		if env.Client.Get(ctx, client.ObjectKey{Namespace: "nobody-ns", Name: "waiting"}, &s) != nil {
			return "", ""
		}
		c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionRemoteSynced)
		if c == nil {
			return "", ""
		}
		return c.Reason, c.Message
	}
	eventually(t, 40*time.Second, "ClusterUnowned on the source", func() bool {
		why, msg := reason()
		return why == v1alpha1.ReasonClusterUnowned && strings.Contains(msg, "nobody-east")
	})
	_, msg := reason()
	t.Logf("source says: %s", msg)
	lift()
	eventually(t, 60*time.Second, "Synced once the Lease can be created", func() bool {
		why, _ := reason()
		return why == v1alpha1.ReasonSynced
	})
}
