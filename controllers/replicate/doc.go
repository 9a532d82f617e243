// Package replicate is the management-side controller that copies objects
// naming a remote cluster into that cluster (Chaos Mesh's remotechaos,
// generalised to any configured kind, handled as unstructured): on the
// replica that owns the cluster it applies the copy, holds a finalizer on
// the source, deletes the copy and waits for it when the source goes, and
// reports problems with the RemoteSynced condition and events.
package replicate
