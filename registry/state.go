package registry

import "time"

// State is the lifecycle state of a registry entry.
type State string

const (
	// StateStarting means the remote fx app is being started.
	StateStarting State = "Starting"
	// StateRunning means the remote manager runs and the last probes succeeded.
	StateRunning State = "Running"
	// StateUnhealthy means the remote manager runs but the remote API server
	// failed ProbeFailureThreshold probes in a row.
	StateUnhealthy State = "Unhealthy"
	// StateFailed means the remote manager exited on its own; Stop then Spawn
	// restarts it.
	StateFailed State = "Failed"
	// StateStopping means Stop has begun; the entry disappears once the
	// manager has exited.
	StateStopping State = "Stopping"
	// StateStopped is reported once, when an entry has left the registry.
	StateStopped State = "Stopped"
)

// Event reports a state change of one entry.
type Event struct {
	// Cluster is the entry's name.
	Cluster string
	// State is the new state.
	State State
	// Err is the cause of StateFailed or StateUnhealthy.
	Err error
}

// Info is a snapshot of one entry.
type Info struct {
	// Name is the cluster name.
	Name string
	// State is the lifecycle state.
	State State
	// Err is the cause of a Failed or Unhealthy state.
	Err error
	// Since is when the entry entered State.
	Since time.Time
	// Spawned is when Spawn started the entry.
	Spawned time.Time
	// ServerVersion is the remote API server's version from the last good probe.
	ServerVersion string
	// ProbeLatency is the duration of the last probe.
	ProbeLatency time.Duration
	// ProbeFailures counts failed probes in a row.
	ProbeFailures int
}
