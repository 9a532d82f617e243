package app

import (
	"strings"
	"testing"
)

// The exit check names a goroutine started after the snapshot and still
// running, and reports nothing once it has ended.
func TestLeakCheckFindsGoroutinesStartedSince(t *testing.T) {
	check := leakCheck()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		blockUntil(stop)
	}()
	if got := check(); !strings.Contains(got, "blockUntil") {
		t.Fatalf("running goroutine not reported: %q", got)
	}
	close(stop)
	<-stopped
	if got := check(); got != "" {
		t.Fatalf("leak reported after the goroutine ended: %q", got)
	}
}

func blockUntil(c chan struct{}) { <-c }
