package app

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/clustershard/clustershard/replica"
)

// Timings client-go's elector would refuse are a clear error at start-up,
// before anything connects: the replica would otherwise run and never join.
func TestRunRefusesTimingsTheElectorRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"--renew-deadline", "2200ms", "--retry-period", "2s"},
		{"--lease-duration", "10s", "--renew-deadline", "9900ms", "--retry-period", "1s"},
		{"--retry-period", "0s"},
	} {
		cmd := newRoot()
		cmd.SetArgs(append([]string{"run", "--replica-id", "r-0", "--kubeconfig", "/nonexistent"}, args...))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "--retry-period") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// Every timing is a flag, and a non-positive one is refused at start-up by
// name, before anything connects.
func TestRunRefusesNonPositiveTimings(t *testing.T) {
	for _, flag := range []string{
		"--probe-interval", "--probe-timeout", "--stop-timeout", "--cleanup-timeout", "--shutdown-timeout",
		"--remote-timeout", "--chart-fetch-timeout", "--remote-start-timeout", "--install-timeout",
		"--helm-timeout", "--resync-period", "--recheck-interval",
	} {
		cmd := newRoot()
		cmd.SetArgs([]string{"run", "--replica-id", "r-0", "--kubeconfig", "/nonexistent", flag, "0s"})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), flag+" 0s must be positive") {
			t.Errorf("%s 0s: %v", flag, err)
		}
	}
	for _, f := range [][2]string{{"--unowned-grace", "-1s"}, {"--settle-window", "-1s"}, {"--settle-timeout", "-1s"}, {"--expected-replicas", "-1"}} {
		cmd := newRoot()
		cmd.SetArgs([]string{"run", "--replica-id", "r-0", "--kubeconfig", "/nonexistent", f[0], f[1]})
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), f[0]) {
			t.Errorf("%s %s: %v", f[0], f[1], err)
		}
	}
}

// The flags' defaults are the replica's (replica.DefaultOptions), each
// written once in the package that uses it.
func TestRunFlagDefaultsAreTheReplicas(t *testing.T) {
	d := replica.DefaultOptions()
	var o options
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	o.addCommon(fs)
	o.addRun(fs)
	for name, want := range map[string]string{
		"lease-duration": d.Shard.LeaseDuration.String(), "renew-deadline": d.Shard.RenewDeadline.String(),
		"retry-period": d.Shard.RetryPeriod.String(), "stop-timeout": d.Shard.StopTimeout.String(),
		"shutdown-timeout": d.ShutdownTimeout.String(), "remote-start-timeout": d.RemoteStartTimeout.String(),
		"install-timeout": d.InstallTimeout.String(), "helm-timeout": d.HelmTimeout.String(),
		"resync-period": d.Resync.String(), "recheck-interval": d.Recheck.String(),
		"probe-interval": d.ProbeInterval.String(), "remote-timeout": d.KubeConfig.Timeout.String(),
	} {
		if got := fs.Lookup(name).DefValue; got != want {
			t.Errorf("--%s defaults to %s, the replica's default is %s", name, got, want)
		}
	}
}

// A kubeconfig Secret namespace that is no namespace name is refused at
// start-up by name.
func TestRunRefusesBadSecretNamespaces(t *testing.T) {
	for _, bad := range []string{"Team_B", "a,,b", strings.Repeat("n", 64)} {
		cmd := newRoot()
		cmd.SetArgs([]string{"run", "--replica-id", "r-0", "--kubeconfig", "/nonexistent", "--kubeconfig-secret-namespaces", bad})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "--kubeconfig-secret-namespaces") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
