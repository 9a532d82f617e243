// Package crdshape is the management-side controller that keeps each
// replicated kind's shape (status subresource, status schema, condition
// fields) equal to its CustomResourceDefinition while the replica runs, so
// that a CRD upgraded in place (say Chaos Mesh's, on a chart upgrade) changes
// how status is written without a restart.
package crdshape
