package shard_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/clustershard/clustershard/shard"
)

func TestClusterLeaseName(t *testing.T) {
	long := strings.Repeat("a", 300)
	cases := map[string]string{
		"short":        "east",
		"63 chars":     strings.Repeat("b", 63),
		"too long":     long,
		"too long too": long + "x",
		"dot at cut":   strings.Repeat("c", 210) + "." + strings.Repeat("d", 100),
	}
	seen := map[string]string{}
	for name, cluster := range cases {
		t.Run(name, func(t *testing.T) {
			got := shard.ClusterLeaseName(cluster)
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Fatalf("%q is not a valid Lease name: %v", got, errs)
			}
			if prev, dup := seen[got]; dup {
				t.Fatalf("clusters %q and %q share Lease %q", prev, cluster, got)
			}
			seen[got] = cluster
			if len(shard.ClusterLeasePrefix+cluster) <= 253 && got != shard.ClusterLeasePrefix+cluster {
				t.Fatalf("a name that fits was changed: %q", got)
			}
		})
	}
}

func TestOptionsAreValidated(t *testing.T) {
	if _, err := shard.New(shard.Options{}); err == nil {
		t.Fatal("empty options accepted")
	}
	_, err := shard.New(shard.Options{Identity: strings.Repeat("x", 64), Namespace: "n"})
	if err == nil || !strings.Contains(err.Error(), "longer than 63") {
		t.Fatalf("too-long identity: %v", err)
	}
	// Timings client-go's elector refuses (renew deadline not above 1.2 x
	// the retry period): accepted, the replica would run and never join.
	_, err = shard.New(shard.Options{Identity: "a", Namespace: "n", LeaseDuration: 15 * time.Second, RenewDeadline: 2200 * time.Millisecond, RetryPeriod: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "1.2") {
		t.Fatalf("renew deadline 2.2s with retry period 2s: %v", err)
	}
	// No margin between the end of the fence and the others' expiry.
	_, err = shard.New(shard.Options{Identity: "a", Namespace: "n", LeaseDuration: 10 * time.Second, RenewDeadline: 9900 * time.Millisecond, RetryPeriod: time.Second})
	if err == nil || !strings.Contains(err.Error(), "margin") {
		t.Fatalf("lease duration 10s with renew deadline 9.9s: %v", err)
	}
	_, err = shard.New(shard.Options{Identity: "a", Namespace: "n", RetryPeriod: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "retry period") {
		t.Fatalf("negative retry period: %v", err)
	}
}
