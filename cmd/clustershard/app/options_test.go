package app

import (
	"strings"
	"testing"
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
