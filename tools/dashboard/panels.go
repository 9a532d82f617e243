package dashboard

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// Panel heights, in grid rows; widths are given per panel and add up to 24
// (the grid's width) on each line of a row.
const (
	statHeight  = 4
	graphHeight = 8
)

// target is one query of a panel: a PromQL expression and the legend of
// its series ("" for Grafana's default).
type target struct {
	expr   string
	legend string
}

// query returns a range query of the dashboard's data source.
func query(refID string, t target) *prometheus.DataqueryBuilder {
	q := prometheus.NewDataqueryBuilder().
		Datasource(datasource()).
		RefId(refID).
		Expr(t.expr).
		EditorMode(prometheus.QueryEditorModeCode).
		Range()
	if t.legend != "" {
		q.LegendFormat(t.legend)
	}
	return q
}

// refID names the i-th query of a panel: A, B, C, ...
func refID(i int) string {
	return string(rune('A' + i))
}

// steps returns absolute thresholds: base below from, above at and over it.
func steps(base string, from float64, above string) *dashboard.ThresholdsConfigBuilder {
	return dashboard.NewThresholdsConfigBuilder().
		Mode(dashboard.ThresholdsModeAbsolute).
		Steps([]dashboard.Threshold{
			{Color: base},
			{Value: new(from), Color: above},
		})
}

// statPanel returns a stat panel showing the last value of each series of
// targets, uncoloured unless the caller sets thresholds and a color mode.
func statPanel(title, description string, width uint32, targets ...target) *stat.PanelBuilder {
	p := stat.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource()).
		Span(width).
		Height(statHeight).
		Unit(units.Short).
		Decimals(0).
		ColorMode(common.BigValueColorModeNone).
		GraphMode(common.BigValueGraphModeArea).
		Orientation(common.VizOrientationAuto).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}))
	for i, t := range targets {
		p.WithTarget(query(refID(i), t))
	}
	return p
}

// timeSeriesPanel returns a time series panel plotting targets in unit.
func timeSeriesPanel(title, description, unit string, width uint32, targets ...target) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource()).
		Span(width).
		Height(graphHeight).
		Unit(unit).
		Min(0).
		FillOpacity(10).
		Legend(common.NewVizLegendOptionsBuilder().
			ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending))
	for i, t := range targets {
		p.WithTarget(query(refID(i), t))
	}
	return p
}

// tablePanel returns a table panel of instant queries in table format (one
// column per label, one "Value #<refID>" column per query).
func tablePanel(title, description string, width uint32, targets ...target) *table.PanelBuilder {
	p := table.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource()).
		Span(width).
		Height(graphHeight).
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{}))
	for i, t := range targets {
		p.WithTarget(query(refID(i), t).Instant().Format(prometheus.PromQueryFormatTable))
	}
	return p
}
