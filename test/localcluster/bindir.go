package localcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BinDirEnv is the environment variable envtest reads for its binaries; the
// Makefile points it at bin/.
const BinDirEnv = "KUBEBUILDER_ASSETS"

// ErrBinariesMissing is returned when kube-apiserver or etcd cannot be found.
var ErrBinariesMissing = errors.New("control plane binaries missing: run `make controlplane`")

// FindBinDir returns the directory holding kube-apiserver and etcd: the value
// of KUBEBUILDER_ASSETS when set, else bin/ at the root of this Go module
// (found by walking up from the working directory to go.mod).
func FindBinDir() (string, error) {
	dir, err := binDir()
	if err != nil {
		return "", err
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("%w: %s not found in %s", ErrBinariesMissing, name, dir)
		}
	}
	return dir, nil
}

// toolTargets names the make target that builds each binary of bin/ besides
// the control plane.
var toolTargets = map[string]string{
	"promtool":   "promtool",
	"prometheus": "prometheus",
}

// FindTool returns the path of a binary that the Makefile builds into bin/
// (promtool, prometheus), looked up in the directory FindBinDir reads, never
// on PATH: tests run what the Makefile built at the pinned version. The error
// names the make target that builds it.
func FindTool(name string) (string, error) {
	target, ok := toolTargets[name]
	if !ok {
		return "", fmt.Errorf("no make target builds %q into bin/", name)
	}
	dir, err := binDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s not found in %s: run `make %s` (the make targets that need it build it first)", name, dir, target)
	}
	return path, nil
}

// binDir is KUBEBUILDER_ASSETS when set, else bin/ at the module root.
func binDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return dir, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// ModuleRoot returns the root of this Go module, for locating deploy/ files.
func ModuleRoot() (string, error) { return moduleRoot() }

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && isMainModule(data) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the clustershard module root (go.mod) above the working directory")
		}
		dir = parent
	}
}

func isMainModule(gomod []byte) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		if strings.TrimSpace(line) == "module github.com/clustershard/clustershard" {
			return true
		}
	}
	return false
}
