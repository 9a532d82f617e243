package drill

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A kept folder must be new or empty: the replicas' journals and the audit
// logs are appended to, and an earlier drill's records would be judged with
// this one's.
func TestKeepDirMustBeEmpty(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "new")
	if err := emptyDir(fresh); err != nil {
		t.Fatalf("a new folder: %v", err)
	}
	if err := emptyDir(fresh); err != nil {
		t.Fatalf("an empty folder: %v", err)
	}
	if err := os.WriteFile(filepath.Join(fresh, "replica-0.0.journal"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := emptyDir(fresh)
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("a folder with an earlier journal: %v, want refused", err)
	}
}
