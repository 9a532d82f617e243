package registry

import "errors"

var (
	// ErrAlreadyExist is returned by Spawn for a cluster name the registry
	// already holds (running, starting, failed or still stopping). The entry
	// already there is kept.
	ErrAlreadyExist = errors.New("remote cluster already exists in the registry")

	// ErrNotExist is returned by Stop and WithClient for a cluster name the
	// registry does not hold, and by WithClient and the remote clients of a
	// cluster that is being stopped.
	ErrNotExist = errors.New("remote cluster does not exist in the registry")

	// ErrNotRunning is returned by WithClient for a cluster whose manager is
	// still starting or has failed.
	ErrNotRunning = errors.New("remote cluster manager is not running")

	// ErrFenced is wrapped by the error of a remote write that the Fence refused.
	ErrFenced = errors.New("remote write refused: this replica no longer owns the cluster")

	// ErrClosed is returned by Spawn after Close.
	ErrClosed = errors.New("registry is closed")
)
