// Package helmrelease installs, upgrades and uninstalls a Helm release in a
// remote cluster with the Helm Go SDK, against the remote cluster's
// rest.Config, and fetches charts (local, HTTP repository, OCI) into a cache
// that never blocks its callers.
package helmrelease
