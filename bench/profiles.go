package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/clustershard/clustershard/tools/drill"
)

// component is one part of a replica that a profile sample is charged to:
// the first component (in components' order) any frame of the sample's
// stack belongs to. The order puts the parts this project chooses before
// the libraries they call: a Helm install's HTTP requests are the Helm
// client's, a reflector's decoding is the caches'; the replica's own
// reconciler, controllers and coordinator come after the libraries they
// build remote managers with, so a manager made during a spawn (which the
// coordinator's acquisition starts) is the manager's.
type component struct {
	name string
	// frames are substrings of a frame's function name (package path
	// included) that mark the component.
	frames []string
}

// components are what CPU, heap and goroutines are broken down into.
var components = []component{
	{"Helm client (spec.install.helm)", []string{"helm.sh/helm/"}},
	{"remote fence (epoch raise, policy)", []string{"clustershard/internal/remotefence."}},
	{"health probes", []string{"clustershard/registry.(*prober", "clustershard/registry.probe", "clustershard/registry.(*probe"}},
	{"events and recorders", []string{"client-go/tools/events.", "client-go/tools/record."}},
	{"metrics", []string{"prometheus/client_golang/", "controller-runtime/pkg/metrics"}},
	{"caches (informers, reflectors, watches)", []string{"client-go/tools/cache.", "controller-runtime/pkg/cache", "client-go/tools/pager", "client-go/informers"}},
	{"controllers and work queues", []string{"controller-runtime/pkg/internal/controller", "client-go/util/workqueue", "controller-runtime/pkg/source", "controller-runtime/pkg/internal/source"}},
	{"discovery and REST mapping", []string{"client-go/discovery", "client-go/restmapper", "controller-runtime/pkg/client/apiutil"}},
	{"fx app", []string{"go.uber.org/fx", "go.uber.org/dig"}},
	{"manager and client set-up", []string{"controller-runtime/pkg/manager", "controller-runtime/pkg/cluster", "controller-runtime/pkg/client.", "controller-runtime/pkg/healthz", "controller-runtime/pkg/webhook"}},
	{"registry (spawn, stop, guards)", []string{"clustershard/registry."}},
	{"membership and Lease work", []string{"clustershard/shard.", "client-go/tools/leaderelection"}},
	{"RemoteCluster reconciler (status, conditions)", []string{"clustershard/controllers/remotecluster", "clustershard/replica."}},
	{"copies and status mirror", []string{"clustershard/controllers/replicate", "clustershard/internal/remotecopy."}},
	{"HTTP/2, TLS and REST transport", []string{"golang.org/x/net/http2", "net/http.", "crypto/tls", "client-go/rest.", "client-go/transport", "client-go/util/flowcontrol"}},
	{"apimachinery: decoding, wait loops (unattributed)", []string{"k8s.io/apimachinery/"}},
	{runtimeComponent, []string{"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge", "runtime.forcegchelper", "runtime.runfinq"}},
}

// runtimeComponent is the Go runtime's own work (GC, scheduler), also
// every stack of runtime frames only.
const runtimeComponent = "Go runtime and GC"

// otherComponent takes what no component claims.
const otherComponent = "other"

// classify names the component of a stack (leaf first).
func classify(locs []*profile.Location) string {
	for _, c := range components {
		for _, l := range locs {
			for _, ln := range l.Line {
				if ln.Function == nil {
					continue
				}
				for _, f := range c.frames {
					if strings.Contains(ln.Function.Name, f) {
						return c.name
					}
				}
			}
		}
	}
	for _, l := range locs {
		for _, ln := range l.Line {
			if ln.Function != nil && !strings.HasPrefix(ln.Function.Name, "runtime.") && !strings.HasPrefix(ln.Function.Name, "internal/") {
				return otherComponent
			}
		}
	}
	return runtimeComponent
}

// breakdown sums sample type typ of p by component.
func breakdown(p *profile.Profile, typ string) (map[string]float64, error) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == typ {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("profile has no sample type %q", typ)
	}
	out := map[string]float64{}
	for _, s := range p.Sample {
		out[classify(s.Location)] += float64(s.Value[idx])
	}
	return out, nil
}

// parseProfiles parses and merges pprof profiles (protobuf, gzipped or not).
func parseProfiles(data ...[]byte) (*profile.Profile, error) {
	var ps []*profile.Profile
	for _, d := range data {
		p, err := profile.Parse(bytes.NewReader(d))
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("no profile")
	}
	return profile.Merge(ps)
}

// writeProfile writes p to dir/name (pprof's gzipped protobuf), for `go
// tool pprof`.
func writeProfile(dir, name string, p *profile.Profile) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	if err := p.Write(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// ComponentCost is one component's share of a measure.
type ComponentCost struct {
	Component string  `json:"component"`
	Value     float64 `json:"value"`
	Share     float64 `json:"share"`
}

// costs orders a breakdown by component (components' order, then other)
// with each value scaled by scale and its share of the total; components
// with nothing are left out.
func costs(b map[string]float64, scale float64, digits int) []ComponentCost {
	total := 0.0
	for _, v := range b {
		total += v
	}
	var out []ComponentCost
	names := make([]string, 0, len(components)+1)
	for _, c := range components {
		names = append(names, c.name)
	}
	names = append(names, otherComponent)
	for _, n := range names {
		v := b[n]
		if v == 0 || total == 0 {
			continue
		}
		out = append(out, ComponentCost{Component: n, Value: round(v*scale, digits), Share: round(v/total, 3)})
	}
	return out
}

// slopes is, per component, the slope of its value over the x of each
// breakdown (a least-squares line, as MiBPerCluster), scaled by scale;
// components whose slope rounds to zero are left out.
func slopes(xs []float64, bs []map[string]float64, scale float64, digits int) []ComponentCost {
	seen := map[string]bool{}
	for _, b := range bs {
		for n := range b {
			seen[n] = true
		}
	}
	per := map[string]float64{}
	for n := range seen {
		ys := make([]float64, len(bs))
		for i, b := range bs {
			ys[i] = b[n]
		}
		per[n] = slope(xs, ys)
	}
	out := costs(per, scale, digits)
	return slices.DeleteFunc(out, func(c ComponentCost) bool { return c.Value == 0 })
}

// idleProfiles takes the in-use heap (after a GC) and the goroutines of the
// session's only replica owning n idle clusters, broken down by component;
// with keep, it writes both to dir too.
func idleProfiles(ctx context.Context, s *drill.Session, n int, keep bool, dir string) (heap, routines map[string]float64, err error) {
	id := drill.ReplicaID(0)
	hb, err := s.Profile(ctx, id, "heap?gc=1")
	if err != nil {
		return nil, nil, err
	}
	gb, err := s.Profile(ctx, id, "goroutine")
	if err != nil {
		return nil, nil, err
	}
	hp, err := parseProfiles(hb)
	if err != nil {
		return nil, nil, err
	}
	gp, err := parseProfiles(gb)
	if err != nil {
		return nil, nil, err
	}
	if keep && dir != "" {
		err = errors.Join(writeProfile(dir, fmt.Sprintf("idle-%d-heap.pb.gz", n), hp), writeProfile(dir, fmt.Sprintf("idle-%d-goroutine.pb.gz", n), gp))
		if err != nil {
			return nil, nil, err
		}
	}
	if heap, err = breakdown(hp, "inuse_space"); err != nil {
		return nil, nil, err
	}
	if routines, err = breakdown(gp, "goroutine"); err != nil {
		return nil, nil, err
	}
	return heap, routines, nil
}

// coldStartCPU merges the CPU profiles of every replica of s over its cold
// start, writes the merge to dir, and breaks it down in ms per spawn of m.
func coldStartCPU(s *drill.Session, m int, dir string) ([]ComponentCost, error) {
	from, to := s.ColdStart()
	var data [][]byte
	for _, id := range s.LiveIDs() {
		ws, err := s.CPUProfiles(id, from, to)
		if err != nil {
			return nil, err
		}
		for _, w := range ws {
			data = append(data, w.Data)
		}
	}
	p, err := parseProfiles(data...)
	if err != nil {
		return nil, err
	}
	if dir != "" {
		if err := writeProfile(dir, "cold-start-cpu.pb.gz", p); err != nil {
			return nil, err
		}
	}
	b, err := breakdown(p, "cpu")
	if err != nil {
		return nil, err
	}
	return costs(b, 1e-6/float64(m), 2), nil // ns → ms per spawn
}
