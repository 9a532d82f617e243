// Package docs_test keeps the README and the pages under docs/ honest: the
// README stays a short front door, every kubectl command names clustershard's
// RemoteCluster kind so that it does not reach Chaos Mesh's, and every link
// between the pages leads somewhere.
package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pages are the README and every page of docs/, by path from the repository root.
func pages(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{"../README.md"}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Clean(filepath.Join("docs", f))] = string(b)
	}
	return out
}

func TestReadmeIsAFrontDoor(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 250 {
		t.Errorf("README.md has %d lines; keep it a front door of at most 250 and move design and reference into docs/", n)
	}
	for _, want := range []string{"make demo", "make test", "helm install", "kubectl apply -k", "clustershard status", "clustershard drain", "clustershard move"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("README.md does not show %q", want)
		}
	}
}

// bareKind is a kubectl command naming the RemoteCluster kind without its
// group: where Chaos Mesh runs it answers with remoteclusters.chaos-mesh.org.
var bareKind = regexp.MustCompile(`kubectl(?:\s+-{1,2}\S+(?:\s+[^-\s]\S*)?)*\s+(?:get|describe|edit|delete|patch|label|annotate|wait|explain)\s+(?:-{1,2}\S+\s+)*(remoteclusters?|rc)(?:[\s/` + "`" + `]|$)`)

func TestKubectlNamesTheKind(t *testing.T) {
	for path, text := range pages(t) {
		for i, line := range strings.Split(text, "\n") {
			if m := bareKind.FindStringSubmatch(line); m != nil {
				t.Errorf("%s:%d: %q names %q, which reaches Chaos Mesh's RemoteCluster where it runs; write remoteclusters.clustershard.io or csrc", path, i+1, strings.TrimSpace(line), m[1])
			}
		}
	}
}

func TestBareKindPattern(t *testing.T) {
	for line, bad := range map[string]bool{
		"kubectl get remoteclusters":                       true,
		"kubectl get rc east":                              true,
		"`kubectl describe remotecluster east`":            true,
		"kubectl -n x get remoteclusters -o wide":          true,
		"kubectl get remoteclusters.clustershard.io":       false,
		"kubectl get csrc -o wide":                         false,
		"kubectl patch remoteclusters.chaos-mesh.org east": false,
		"kubectl get pods":                                 false,
	} {
		if got := bareKind.MatchString(line); got != bad {
			t.Errorf("%q: matched %v, want %v", line, got, bad)
		}
	}
}

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+)$`)
	notSlug = regexp.MustCompile(`[^\p{L}\p{N}\s_-]`)
)

// slug is the anchor GitHub gives a heading.
func slug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	h = notSlug.ReplaceAllString(h, "")
	return strings.ReplaceAll(h, " ", "-")
}

func anchors(text string) map[string]bool {
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if m := heading.FindStringSubmatch(line); m != nil && !inFence {
			out[slug(m[1])] = true
		}
	}
	return out
}

// Every relative link of the README and docs/ names a file of the
// repository, and every anchor a heading of its page.
func TestLinksLeadSomewhere(t *testing.T) {
	all := pages(t)
	for path, text := range all {
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Clean(filepath.Join(filepath.Dir(path), file))
				if _, err := os.Stat(filepath.Join("..", dest)); err != nil {
					t.Errorf("%s: link %q: %s does not exist", path, target, dest)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			text, ok := all[dest]
			if !ok {
				b, err := os.ReadFile(filepath.Join("..", dest))
				if err != nil {
					t.Errorf("%s: link %q: %v", path, target, err)
					continue
				}
				text = string(b)
			}
			if !anchors(text)[anchor] {
				t.Errorf("%s: link %q: %s has no heading for #%s", path, target, dest, anchor)
			}
		}
	}
}
