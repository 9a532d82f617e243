package drill

import (
	"bytes"
	"context"
	"fmt"

	"k8s.io/client-go/rest"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Histogram is the count and sum of one histogram series.
type Histogram struct {
	Count uint64
	Sum   float64
}

// ScrapeHistograms reads, from the metrics endpoint of every live replica,
// the histogram family name by its label label: per process
// (replica@incarnation-index), per label value. Counters restart with a
// process, so a difference is taken per process.
func (s *Session) ScrapeHistograms(ctx context.Context, name, label string) (map[string]map[string]Histogram, error) {
	out := map[string]map[string]Histogram{}
	for i, rep := range s.r.reps.all {
		if s.r.reps.live[rep.id] != rep {
			continue
		}
		fams, err := scrape(ctx, rep.metrics)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", rep.id, err)
		}
		per := map[string]Histogram{}
		if f := fams[name]; f != nil {
			for _, m := range f.GetMetric() {
				v := ""
				for _, l := range m.GetLabel() {
					if l.GetName() == label {
						v = l.GetValue()
					}
				}
				h := m.GetHistogram()
				per[v] = Histogram{Count: h.GetSampleCount(), Sum: h.GetSampleSum()}
			}
		}
		out[fmt.Sprintf("%s#%d", rep.id, i)] = per
	}
	return out, nil
}

// Counters sums, over every live replica, the counter family name by the
// values of labels (joined by "|").
func (s *Session) Counters(ctx context.Context, name string, labels ...string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, rep := range s.r.reps.all {
		if s.r.reps.live[rep.id] != rep {
			continue
		}
		fams, err := scrape(ctx, rep.metrics)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", rep.id, err)
		}
		f := fams[name]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			key := ""
			for i, want := range labels {
				if i > 0 {
					key += "|"
				}
				for _, l := range m.GetLabel() {
					if l.GetName() == want {
						key += l.GetValue()
					}
				}
			}
			out[key] += m.GetCounter().GetValue()
		}
	}
	return out, nil
}

func scrape(ctx context.Context, addr string) (map[string]*dto.MetricFamily, error) {
	b, err := get(ctx, "http://"+addr+"/metrics")
	if err != nil {
		return nil, err
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(bytes.NewReader(b))
}

// ManagementHosts are the host:port addresses the replicas reach the
// management API server at: each replica's own loopback proxy.
func (s *Session) ManagementHosts() map[string]bool {
	out := map[string]bool{}
	for _, p := range s.r.proxies {
		out[p.Addr()] = true
	}
	return out
}

// Gauges reads the gauge name from every live replica, by replica id.
func (s *Session) Gauges(ctx context.Context, name string) (map[string]float64, error) {
	out := map[string]float64{}
	for id, rep := range s.r.reps.live {
		fams, err := scrape(ctx, rep.metrics)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", id, err)
		}
		if f := fams[name]; f != nil && len(f.GetMetric()) > 0 {
			out[id] = f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return out, nil
}

// PIDs are the process ids of the live replicas, by replica id.
func (s *Session) PIDs() map[string]int {
	out := map[string]int{}
	for id, rep := range s.r.reps.live {
		out[id] = rep.cmd.Process.Pid
	}
	return out
}

// RemoteConfig is an admin rest.Config of remote API server i.
func (s *Session) RemoteConfig(i int) *rest.Config { return s.r.cp.Remotes[i].Config }
