package shard

import (
	"context"
	"errors"
)

// Handler is told when this replica gains or loses a cluster. The
// coordinator serialises the calls of one cluster: Lost never overlaps
// Acquired of the same cluster.
type Handler interface {
	// Acquired is called after the cluster's Lease was acquired: spawn its
	// remote manager. It runs while ownership holds; errors are logged and
	// retried by the caller's own means (the remotecluster controller).
	Acquired(ctx context.Context, cluster string)
	// Lost is called when the cluster must stop here: stop its remote manager
	// and return once it has stopped, or with an error when ctx ends first.
	// Only after a nil return is the Lease released.
	Lost(ctx context.Context, cluster string) error
}

var (
	// ErrNotMember is returned by the fence while this replica's membership is
	// not valid.
	ErrNotMember = errors.New("this replica's membership is not valid")
	// ErrNotOwner is returned by the fence for a cluster this replica does not own.
	ErrNotOwner = errors.New("this replica does not own the cluster")
)
