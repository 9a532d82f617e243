package drill

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Report is the outcome of a drill, written as JSON.
type Report struct {
	Machine       string   `json:"machine"`
	Replicas      int      `json:"replicas"`
	Clusters      int      `json:"clusters"`
	Objects       int      `json:"objects"`
	LeaseDuration string   `json:"leaseDuration"`
	RenewDeadline string   `json:"renewDeadline"`
	RetryPeriod   string   `json:"retryPeriod"`
	Scenarios     []Result `json:"scenarios"`
	// Leftovers are child processes still alive after the drill's cleanup
	// (I4: there must be none).
	Leftovers []string `json:"leftovers,omitempty"`
	// Leaks are replicas stopped at the end of the drill that left
	// goroutines running after their shutdown (I4: there must be none).
	Leaks []string `json:"leaks,omitempty"`
}

// Passed reports whether every scenario passed.
func (r *Report) Passed() bool {
	for _, s := range r.Scenarios {
		if !s.Pass() {
			return false
		}
	}
	return len(r.Scenarios) > 0 && len(r.Leftovers) == 0 && len(r.Leaks) == 0
}

// WriteJSON writes the report to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

// Result is one scenario's outcome.
type Result struct {
	Scenario string `json:"scenario"`
	// Victim is the replica the fault hit; Moved how many clusters it held.
	Victim string `json:"victim"`
	Moved  int    `json:"moved"`
	// Recovery is, per moved cluster, how long it had no manager (I2),
	// against Bound: from the fault to its manager running on a live owner
	// after a crash, from its old owner's release after a planned hand-over.
	Recovery map[string]time.Duration `json:"recovery"`
	Bound    string                   `json:"bound"`
	// Converged is how long I3 took to hold after recovery.
	Converged string `json:"converged"`
	// Downtime is how long a restarted API server was away.
	Downtime string `json:"downtime,omitempty"`
	// Churn says what the churn did during the fault, if it ran.
	Churn string `json:"churn,omitempty"`
	// Notes are events of the test environment worth knowing (not
	// violations), such as an API server that had to be killed.
	Notes []string `json:"notes,omitempty"`
	// Intervals is how many authority intervals I1 compared; Writes how many
	// remote writes (from the remote API servers' audit logs) it checked
	// against them, so far in the drill.
	Intervals int `json:"intervals"`
	Writes    int `json:"writes"`
	// Violations by invariant (I1..I4); empty when the scenario passed.
	Violations map[string][]string `json:"violations,omitempty"`
}

// Pass reports whether no invariant was violated.
func (r Result) Pass() bool { return len(r.Violations) == 0 }

func (r *Result) note(inv, format string, args ...any) {
	if r.Violations == nil {
		r.Violations = map[string][]string{}
	}
	r.Violations[inv] = append(r.Violations[inv], fmt.Sprintf(format, args...))
}

func (r Result) fail(inv, format string, args ...any) Result {
	r.note(inv, format, args...)
	return r
}

// MedianMax returns the median and the maximum recovery time.
func (r Result) MedianMax() (time.Duration, time.Duration) {
	var ds []time.Duration
	for _, d := range r.Recovery {
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)-1]
}

// Line is the one-line summary of the scenario, then one line per violation.
func (r Result) Line() string {
	med, worst := r.MedianMax()
	verdict := "PASS"
	if !r.Pass() {
		verdict = "FAIL"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-6s %-8s victim %s (%d clusters): recovery median %v max %v (bound %s); converged in %s; I1 over %d intervals and %d remote writes",
		verdict, r.Scenario, r.Victim, r.Moved, med.Round(time.Millisecond), worst.Round(time.Millisecond), r.Bound, r.Converged, r.Intervals, r.Writes)
	if r.Churn != "" {
		fmt.Fprintf(&b, "\n       %s", r.Churn)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n       note: %s", n)
	}
	for _, inv := range []string{"I1", "I2", "I3", "I4"} {
		status := "ok"
		if len(r.Violations[inv]) > 0 {
			status = "VIOLATED"
		}
		fmt.Fprintf(&b, "\n       %s %s", inv, status)
		for _, v := range r.Violations[inv] {
			fmt.Fprintf(&b, "\n         - %s", v)
		}
	}
	return b.String()
}

func machine() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s %s/%s, %d CPUs, %s", host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
}
