package bench

import (
	"fmt"
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plots draws the figures of RESULTS.md into dir as SVG and returns their
// file names by figure.
func Plots(r *Results, dir string) (map[string]string, error) {
	out := map[string]string{}
	save := func(name string, p *plot.Plot) error {
		file := name + ".svg"
		if err := p.Save(6*vg.Inch, 3.6*vg.Inch, filepath.Join(dir, file)); err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		out[name] = file
		return nil
	}
	if len(r.WriteCost) > 0 {
		p := plot.New()
		p.Title.Text = "Ownership API writes per second (R=3, steady state)"
		p.X.Label.Text, p.Y.Label.Text = "RemoteClusters", "writes/s"
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		var shard, base plotter.XYs
		for _, w := range r.WriteCost {
			shard = append(shard, plotter.XY{X: float64(w.Clusters), Y: w.Shard})
			if w.Baseline > 0 {
				base = append(base, plotter.XY{X: float64(w.Clusters), Y: w.Baseline})
			}
		}
		if err := plotutil.AddLinePoints(p, "clustershard", shard, "LeaderElector per cluster", base); err != nil {
			return nil, err
		}
		if err := save("writecost", p); err != nil {
			return nil, err
		}
	}
	if len(r.Handover) > 0 {
		p := plot.New()
		p.Title.Text = "Time without a remote manager per moved cluster"
		p.Y.Label.Text = "seconds"
		var names []string
		for i, h := range r.Handover {
			if len(h.Gaps) == 0 {
				continue
			}
			b, err := plotter.NewBoxPlot(vg.Points(30), float64(i), plotter.Values(h.Gaps))
			if err != nil {
				return nil, err
			}
			p.Add(b)
			names = append(names, h.Name())
		}
		p.NominalX(names...)
		if err := save("handover", p); err != nil {
			return nil, err
		}
	}
	if r.Memory != nil && len(r.Memory.Points) > 0 {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("Replica RSS by owned idle clusters (%.2f MiB per cluster)", r.Memory.MiBPerCluster)
		p.X.Label.Text, p.Y.Label.Text = "owned clusters", "RSS (MiB)"
		var pts plotter.XYs
		for _, m := range r.Memory.Points {
			pts = append(pts, plotter.XY{X: float64(m.Clusters), Y: m.RSSMiB})
		}
		if err := plotutil.AddLinePoints(p, "measured", pts); err != nil {
			return nil, err
		}
		if err := save("memory", p); err != nil {
			return nil, err
		}
	}
	if len(r.Balance) > 0 {
		p := plot.New()
		p.Title.Text = "Balance: max/mean owned clusters per replica"
		p.Y.Label.Text = "max/mean"
		var names []string
		var vals plotter.Values
		for _, b := range r.Balance {
			names = append(names, fmt.Sprintf("%s R=%d", b.Mode, b.Replicas))
			vals = append(vals, b.MaxOverMean)
		}
		bars, err := plotter.NewBarChart(vals, vg.Points(24))
		if err != nil {
			return nil, err
		}
		bars.Color = color.RGBA{R: 70, G: 110, B: 180, A: 255}
		p.Add(bars)
		p.NominalX(names...)
		if err := save("balance", p); err != nil {
			return nil, err
		}
	}
	if r.Replication != nil && len(r.Replication.Runs) > 0 {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("Initial sync of %d objects over %d clusters", r.Replication.Objects, r.Replication.Clusters)
		p.Y.Label.Text = "objects/s"
		var names []string
		var vals plotter.Values
		for _, run := range r.Replication.Runs {
			names = append(names, fmt.Sprintf("R=%d", run.Replicas))
			vals = append(vals, run.PerSec)
		}
		bars, err := plotter.NewBarChart(vals, vg.Points(40))
		if err != nil {
			return nil, err
		}
		bars.Color = color.RGBA{R: 70, G: 150, B: 90, A: 255}
		p.Add(bars)
		p.NominalX(names...)
		if err := save("replication", p); err != nil {
			return nil, err
		}
	}
	return out, nil
}
