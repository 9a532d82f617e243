// Package replica assembles one clustershard replica: the management
// manager, the shard coordinator, the registry of remote managers and the
// controllers, so the binary and the tests run the same assembly. It is the
// one package that knows all of them; start reading here.
//
// # The layers
//
//   - Leaves (no clustershard package below them but each other): api/v1alpha1,
//     internal/metrics, internal/remote (kubeconfig, User-Agent, probe),
//     internal/remotecopy (the replicated kinds), internal/remotefence (the
//     ownership epoch), internal/helmrelease, internal/scheme.
//   - Cores: shard (who owns which cluster) and registry (one remote manager
//     per owned cluster). Neither imports the other.
//   - Controllers (controllers/...): they reach ownership and the registry
//     through small interfaces of their own and never import shard.
//   - This assembly, then cmd/clustershard (flags, `run`, `status`).
//
// Every timing and limit has one default, a Default* constant of the package
// that uses it; DefaultOptions (defaults.go) gathers them, and the flags of
// cmd/clustershard take their defaults from it.
//
// Tools and harnesses live apart (tools/, test/,
// cmd/clustershard-dev) and the product never links them; .golangci.yml
// (depguard) keeps it so.
//
// # Start
//
// New builds, in order: the management manager (Leases cached in the
// controller namespace only; replicated kinds read as unstructured from the
// cache); the status shape of each replicated kind, read once from its CRD;
// the coordinator, with the Notifier as its Handler; the registry, with the
// coordinator as its Fence and the Notifier as its OnEvent; then
// controllers.Add registers the RemoteCluster controller, one replicate
// controller per kind and the CRD shape controller. The Replica itself is a runnable of the manager: once
// the caches have synced, Start runs the coordinator.
//
// # A cluster comes to this replica
//
//	coordinator pass: the ring assigns it here and its Lease is free
//	  → Lease acquired (shard rule 1)
//	  → Notifier.Acquired → event to the controllers
//	  → RemoteCluster controller: read the kubeconfig Secret, parse it,
//	    probe /version, raise the ownership epoch in the remote,
//	    install (CRDs, Helm release), Registry.Spawn
//	  → the remote fx app starts its manager; every remote write passes the
//	    gate, the fence (Coordinator.WriteDeadline) and carries the epoch
//	  → Running: Notifier.RegistryEvent → Coordinator.ManagerRunning (the
//	    hand-over is measured) and an event to the controllers
//	  → replicate controllers copy the sources naming the cluster; the
//	    remote monitor mirrors the copies' status back.
//
// # A cluster leaves
//
//	the ring moves it away (a member joined, left or lapsed)
//	  → Notifier.Lost → Registry.Stop: the gate closes, calls in flight are
//	    cancelled, the manager stops and is waited for (bounded)
//	  → the controller forgets the cluster's epoch and install
//	  → the coordinator releases the Lease (or leaves it to expire when the
//	    stop timed out or a write is in doubt) (shard rule 3)
//	  → the next owner acquires it and raises a newer epoch, which the
//	    remote API server enforces against anything still on its way.
//
// # Shutdown and faults
//
// On SIGTERM the manager's context ends; Start's coordinator leaves the
// ring and hands every cluster over within ShutdownTimeout (shard rule 5),
// then the registry and the chart cache close. A replica that cannot renew
// its membership fences itself (shard rule 4) and its clusters move once its
// Lease expires; a crashed one's Leases expire the same way.
package replica
