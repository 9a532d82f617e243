// Package registry holds this replica's remote managers: one go.uber.org/fx
// application with a controller-runtime manager per owned remote cluster,
// started by Spawn, stopped by Stop and used through WithClient.
package registry
