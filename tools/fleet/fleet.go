// Package fleet populates a local control plane with RemoteClusters, their
// kubeconfig Secrets and replicated ExampleChaos objects, for the demo and
// the drills.
package fleet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	examplev1alpha1 "github.com/clustershard/clustershard/api/example/v1alpha1"
	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/test/localcluster"
)

// ExampleKind is the --replicate-kind of the example kind.
const ExampleKind = "ExampleChaos.v1alpha1.example.clustershard.io/examplechaos"

// ObjectDuration is the spec.duration of every populated ExampleChaos.
const ObjectDuration = "30s"

// Options size the fleet.
type Options struct {
	// Namespace holds the kubeconfig Secrets (and the replicas' Leases).
	Namespace string
	// ScopePrefix prefixes each cluster's own namespace, in which its
	// objects live in the management cluster and which it is limited to
	// remotely (spec.namespaces).
	ScopePrefix       string
	ClustersPerRemote int
	ObjectsPerCluster int
	// HelmChart, when set, is a local chart path (WriteAgentChart) that
	// every cluster installs as release AgentRelease in its scope namespace.
	HelmChart string
	// SharedNamespace, when set, is a namespace every cluster is limited to
	// besides its own: objects there may name any cluster, and be moved
	// from one to another.
	SharedNamespace string
}

// Cluster is one populated RemoteCluster.
type Cluster struct {
	// Name is the RemoteCluster's name; Scope its namespace.
	Name, Scope string
	// Remote is the index of its remote API server.
	Remote int
}

// Populate creates, for every remote API server of cp, ClustersPerRemote
// RemoteClusters named fleet-<remote>-<nn>, each with its kubeconfig Secret,
// its namespace scope and ObjectsPerCluster ExampleChaos objects.
func Populate(ctx context.Context, c client.Client, cp *localcluster.ControlPlane, o Options) ([]Cluster, error) {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}); client.IgnoreAlreadyExists(err) != nil {
		return nil, err
	}
	if o.SharedNamespace != "" {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.SharedNamespace}}); client.IgnoreAlreadyExists(err) != nil {
			return nil, err
		}
	}
	var out []Cluster
	for r, remote := range cp.Remotes {
		for i := range o.ClustersPerRemote {
			name := fmt.Sprintf("fleet-%d-%02d", r, i)
			secret := name + "-kubeconfig"
			if err := localcluster.WriteKubeConfigSecret(ctx, c, o.Namespace, secret, localcluster.DefaultSecretKey, remote.KubeConfig); err != nil {
				return nil, err
			}
			scope := o.ScopePrefix + name
			namespaces := []string{scope}
			if o.SharedNamespace != "" {
				namespaces = append(namespaces, o.SharedNamespace)
			}
			install := &v1alpha1.InstallSpec{Namespace: scope}
			if o.HelmChart != "" {
				install.Helm = &v1alpha1.HelmInstall{
					Chart: o.HelmChart, ReleaseName: AgentRelease, Namespace: scope,
					Values: &runtime.RawExtension{Raw: fmt.Appendf(nil, `{"cluster":%q}`, name)},
				}
			}
			rc := &v1alpha1.RemoteCluster{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: v1alpha1.RemoteClusterSpec{
					KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyReference{Namespace: o.Namespace, Name: secret, Key: localcluster.DefaultSecretKey}},
					Install:    install,
					Namespaces: namespaces,
				},
			}
			if err := c.Create(ctx, rc); err != nil {
				return nil, err
			}
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scope}}); client.IgnoreAlreadyExists(err) != nil {
				return nil, err
			}
			for j := range o.ObjectsPerCluster {
				obj := &examplev1alpha1.ExampleChaos{
					ObjectMeta: metav1.ObjectMeta{Namespace: scope, Name: fmt.Sprintf("chaos-%d", j)},
					Spec:       examplev1alpha1.ExampleChaosSpec{RemoteCluster: name, Action: "pod-kill", Duration: ObjectDuration},
				}
				if err := c.Create(ctx, obj); err != nil {
					return nil, err
				}
			}
			out = append(out, Cluster{Name: name, Scope: scope, Remote: r})
		}
	}
	return out, nil
}
