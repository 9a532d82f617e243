package replica_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/clustershard/clustershard/internal/metrics"
	"github.com/clustershard/clustershard/registry"
	"github.com/clustershard/clustershard/replica"
)

// Lost stops the cluster's remote manager before it returns (stop before
// release), then tells the controllers to forget the ownership period
// (OnLost); a cluster with no manager here is lost without an error, and is
// forgotten all the same.
func TestNotifierStopsThenForgets(t *testing.T) {
	reg, err := registry.New(context.Background(), registry.Options{ManageClient: env.Client, Scheme: env.Scheme, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close(context.Background()) })
	var forgotten []string
	var runningWhenForgotten []bool
	n := &replica.Notifier{Registry: reg, OnLost: func(cluster string) {
		_, ok := reg.Get(cluster)
		forgotten = append(forgotten, cluster)
		runningWhenForgotten = append(runningWhenForgotten, ok)
	}}
	if err := reg.Spawn("owned", env.Remotes[0].Config); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if info, ok := reg.Get("owned"); ok && info.State == registry.StateRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the remote manager did not run")
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := n.Lost(t.Context(), "owned"); err != nil {
		t.Fatalf("Lost: %v", err)
	}
	if _, ok := reg.Get("owned"); ok {
		t.Error("the remote manager was still in the registry when Lost returned")
	}
	if err := n.Lost(t.Context(), "never-spawned"); err != nil && !errors.Is(err, registry.ErrNotExist) {
		t.Errorf("Lost of a cluster without a manager: %v", err)
	} else if err != nil {
		t.Errorf("Lost of a cluster without a manager returned %v, want nil", err)
	}
	if len(forgotten) != 2 || forgotten[0] != "owned" || forgotten[1] != "never-spawned" {
		t.Fatalf("forgotten %v, want [owned never-spawned]", forgotten)
	}
	if runningWhenForgotten[0] {
		t.Error("the period was forgotten while its manager was still registered")
	}
}

// A subscriber whose buffer is full misses events without blocking the
// sender, and every miss is counted.
func TestNotifierCountsDroppedEvents(t *testing.T) {
	n := &replica.Notifier{}
	ch := n.Subscribe()
	before := testutil.ToFloat64(metrics.ClusterEventsDropped)
	for range cap(ch) + 3 {
		n.Notify("busy")
	}
	if got := testutil.ToFloat64(metrics.ClusterEventsDropped) - before; got != 3 {
		t.Errorf("%v events counted as dropped, want 3", got)
	}
	if len(ch) != cap(ch) {
		t.Errorf("%d events buffered, want %d", len(ch), cap(ch))
	}
}
