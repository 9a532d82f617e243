package remotecluster

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/internal/remotecopy"
	"github.com/clustershard/clustershard/test/localcluster"
)

// A replicated kind's CRD is applied into the remote once: the next owner
// (a hand-over, a take-over after a crash) finds it recorded with the hash
// of what was applied and established, and applies nothing. A CRD whose
// record does not match (changed in the management cluster, or edited in
// the remote) is applied again.
func TestUnchangedCRDIsNotAppliedAgain(t *testing.T) {
	ctx := t.Context()
	const name = "crd-once"
	remoteCluster(t, name, name+"-kubeconfig", localcluster.DefaultSecretKey, env.Remotes[0].KubeConfig)
	kind, err := remotecopy.ParseKind("ExampleChaos.v1alpha1.example.clustershard.io/examplechaos")
	if err != nil {
		t.Fatal(err)
	}
	owner := func(want string) {
		t.Helper()
		r, reg, _ := newReconciler(name) // a new owner: nothing of the last one's memory
		r.Kinds = []remotecopy.Kind{kind}
		if _, err := reconcileOnce(t, r, name); err != nil {
			t.Fatal(err)
		}
		if spawns, _ := reg.counts(); spawns != 1 {
			t.Fatalf("%d spawns, want 1", spawns)
		}
		if cond := condition(t, name, v1alpha1.ConditionInstalled); !strings.HasPrefix(cond.Message, want) {
			t.Errorf("Installed: %q, want it to start with %q", cond.Message, want)
		}
	}
	owner("1 CRDs applied, 0 current")
	owner("0 CRDs applied, 1 current")

	remote := env.RemoteClients[0]
	var crd apiextensionsv1.CustomResourceDefinition
	if err := remote.Get(ctx, client.ObjectKey{Name: kind.CRD}, &crd); err != nil {
		t.Fatal(err)
	}
	delete(crd.Annotations, v1alpha1.InstallHashAnnotation)
	if err := remote.Update(ctx, &crd); err != nil {
		t.Fatal(err)
	}
	owner("1 CRDs applied, 0 current")
	owner("0 CRDs applied, 1 current")
}
