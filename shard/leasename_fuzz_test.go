package shard_test

import (
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/clustershard/clustershard/api/v1alpha1"
	"github.com/clustershard/clustershard/shard"
)

// Any two cluster names: the Lease name of a valid object name is a valid
// object name of at most 253 characters, two different clusters never share
// a Lease (short of a SHA-256 collision), and a Lease maps back to its
// cluster only through its own name.
func FuzzClusterLeaseName(f *testing.F) {
	long := strings.Repeat("a", 300)
	f.Add("east", "west")
	f.Add(strings.Repeat("b", 63), strings.Repeat("b", 62))
	f.Add(long, long+"x")
	f.Add(strings.Repeat("c", 210)+"."+strings.Repeat("d", 100), strings.Repeat("c", 210)+"-"+strings.Repeat("d", 100))
	f.Add(strings.Repeat("e", 236), strings.Repeat("e", 237))
	f.Fuzz(func(t *testing.T, a, b string) {
		na, nb := shard.ClusterLeaseName(a), shard.ClusterLeaseName(b)
		if a != b && na == nb {
			t.Fatalf("clusters %q and %q share the Lease %q", a, b, na)
		}
		if len(na) > validation.DNS1123SubdomainMaxLength {
			t.Fatalf("Lease name of %d characters for %q", len(na), a)
		}
		if len(validation.IsDNS1123Subdomain(a)) == 0 {
			if msgs := validation.IsDNS1123Subdomain(na); len(msgs) > 0 {
				t.Fatalf("cluster %q gets the invalid Lease name %q: %v", a, na, msgs)
			}
		}
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: na, Annotations: map[string]string{v1alpha1.ClusterAnnotation: a}}}
		if got := shard.LeaseCluster(lease); a != "" && got != a {
			t.Fatalf("Lease %q annotated %q stands for %q", na, a, got)
		}
		lease.Annotations[v1alpha1.ClusterAnnotation] = b
		if got := shard.LeaseCluster(lease); a != b && got != "" {
			t.Fatalf("Lease %q of %q, annotated %q, stands for %q", na, a, b, got)
		}
	})
}
