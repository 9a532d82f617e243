package drill

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// CPUWindow is one CPU profile of a replica (pprof's protobuf, gzipped as
// Go writes it) and the span it covers.
type CPUWindow struct {
	From, To time.Time
	Data     []byte
}

// cpuRecorder fetches a replica's CPU profile in consecutive windows from
// the moment its profile server answers until the process exits, so a
// measurement can take the windows of any span (a cold start) afterwards.
type cpuRecorder struct {
	mu      sync.Mutex
	windows []CPUWindow
}

// cpuWindow is the span of each recorded CPU profile.
const cpuWindow = 2 * time.Second

// recordCPU starts recording the CPU profile served at addr in windows of
// cpuWindow until exited is closed.
func recordCPU(addr string, exited <-chan struct{}) *cpuRecorder {
	rec := &cpuRecorder{}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-exited; cancel() }()
	go func() {
		url := "http://" + addr + "/debug/pprof/profile?seconds=" + strconv.Itoa(int(cpuWindow/time.Second))
		for ctx.Err() == nil {
			from := time.Now()
			data, err := get(ctx, url)
			if err != nil {
				// Not serving yet (the process is starting), or gone.
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Millisecond):
				}
				continue
			}
			rec.mu.Lock()
			rec.windows = append(rec.windows, CPUWindow{From: from, To: time.Now(), Data: data})
			rec.mu.Unlock()
		}
	}()
	return rec
}

// covers reports whether a recorded window ends at or after t.
func (rec *cpuRecorder) covers(t time.Time) bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, w := range rec.windows {
		if !w.To.Before(t) {
			return true
		}
	}
	return false
}

// between returns the windows that overlap [from, to].
func (rec *cpuRecorder) between(from, to time.Time) []CPUWindow {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []CPUWindow
	for _, w := range rec.windows {
		if w.To.After(from) && w.From.Before(to) {
			out = append(out, w)
		}
	}
	return out
}

func get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", url, resp.Status, b)
	}
	return b, nil
}

// ColdStart is the span of the session's start-up: from the replicas'
// start until every remote manager ran.
func (s *Session) ColdStart() (from, to time.Time) {
	return s.r.startedAt, s.r.startedAt.Add(s.r.startUp)
}

// CPUProfiles returns the CPU profile windows of the live replica id that
// overlap [from, to] (Options.Profile), once the window that covers to has
// been recorded (waiting at most two windows for it).
func (s *Session) CPUProfiles(id string, from, to time.Time) ([]CPUWindow, error) {
	rep := s.r.reps.live[id]
	if rep == nil || rep.cpu == nil {
		return nil, fmt.Errorf("replica %s is not live or not profiled", id)
	}
	// The window that covers to may still be recording (a cold start of a
	// few clusters ends within the first window): wait for it, at most two
	// windows.
	deadline := time.Now().Add(2*cpuWindow + time.Second)
	for !rep.cpu.covers(to) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	return rep.cpu.between(from, to), nil
}

// Profile fetches profile kind (heap, goroutine, allocs) of the live replica
// id (Options.Profile), in pprof's protobuf format.
func (s *Session) Profile(ctx context.Context, id, kind string) ([]byte, error) {
	rep := s.r.reps.live[id]
	if rep == nil || rep.pprof == "" {
		return nil, fmt.Errorf("replica %s is not live or not profiled", id)
	}
	return get(ctx, "http://"+rep.pprof+"/debug/pprof/"+kind)
}
