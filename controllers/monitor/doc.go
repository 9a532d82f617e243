// Package monitor is the remote-side controller (Chaos Mesh's
// remotechaosmonitor), given to the registry as a remote module: inside each
// remote manager it watches only the copies carrying its cluster's identity,
// mirrors their status back to the source in the management cluster,
// re-creates a copy deleted by hand while its source lives, and deletes a
// copy whose source is gone.
package monitor
