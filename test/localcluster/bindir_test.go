package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A tool missing from bin/ is an error naming the make target that builds
// it; one present is found there, not on PATH.
func TestFindTool(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(BinDirEnv, dir)
	for name, target := range toolTargets {
		_, err := FindTool(name)
		if err == nil || !strings.Contains(err.Error(), "make "+target) {
			t.Fatalf("FindTool(%q) with an empty bin/: %v, want an error naming `make %s`", name, err, target)
		}
		want := filepath.Join(dir, name)
		if err := os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := FindTool(name)
		if err != nil || got != want {
			t.Fatalf("FindTool(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := FindTool("kubectl"); err == nil {
		t.Fatal("FindTool of a binary no target builds: no error")
	}
}
