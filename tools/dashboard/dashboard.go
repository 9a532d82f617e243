// Package dashboard builds clustershard's Grafana dashboard as code with the
// Grafana Foundation SDK: one row per concern (fleet, ownership, hand-over,
// fencing, remote health, replication, API writes, controllers), every panel
// reading the Prometheus data source chosen by the dashboard's datasource
// variable. hack/gen-dashboard writes the result under
// deploy/monitoring/grafana, and tests hold every query against the metrics
// clustershard exports.
package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

const (
	// UID is the dashboard's uid, stable across Grafana instances.
	UID = "clustershard"
	// Title is the dashboard's title.
	Title = "clustershard"
	// DatasourceVariable is the name of the template variable selecting the
	// Prometheus data source of every panel and query.
	DatasourceVariable = "datasource"
)

// classicDashboard is the SDK's classic (schema v1) dashboard JSON model,
// the one Grafana's file provisioning and dashboard sidecar import. The SDK
// marks it deprecated in favour of its v2 resource model, which only recent
// Grafana versions read, and its panel builders (timeseries, stat, table)
// still produce classic panels.
type classicDashboard = dashboard.Dashboard //nolint:staticcheck // classic JSON model on purpose, see above.

// row is one row of the dashboard: its title and the panels below it.
type row struct {
	title  string
	panels []cog.Builder[dashboard.Panel]
}

// rows returns the dashboard's rows, top to bottom.
func rows() []row {
	return []row{
		fleetOverviewRow(),
		ownershipRow(),
		handOverRow(),
		unownedAndFencedRow(),
		remoteHealthRow(),
		replicationRow(),
		apiWritesRow(),
		controllersRow(),
	}
}

// datasource is the reference to the data source chosen by the datasource
// variable, set on every panel and every query.
func datasource() common.DataSourceRef {
	return common.DataSourceRef{
		Type: new("prometheus"),
		Uid:  new("${" + DatasourceVariable + "}"),
	}
}

// build assembles the dashboard with the SDK builders and numbers its panels.
func build() (classicDashboard, error) {
	//nolint:staticcheck // classic JSON model on purpose, see classicDashboard.
	b := dashboard.NewDashboardBuilder(Title).
		Uid(UID).
		Description("Ownership, hand-overs, remote cluster health, replication and controllers of the clustershard replicas.").
		Tags([]string{"clustershard"}).
		Time("now-1h", "now").
		Refresh("30s").
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder(DatasourceVariable).
			Label("Data source").
			Description("Prometheus data source scraping the clustershard replicas.").
			Type("prometheus"))
	for _, r := range rows() {
		b.WithRow(dashboard.NewRowBuilder(r.title))
		for _, p := range r.panels {
			b.WithPanel(p)
		}
	}
	d, err := b.Build()
	if err != nil {
		return classicDashboard{}, fmt.Errorf("build dashboard: %w", err)
	}
	// Stable panel ids, in layout order, so the output does not depend on
	// Grafana assigning them at import.
	for i, p := range d.Panels {
		id := uint32(i + 1)
		switch {
		case p.RowPanel != nil:
			p.RowPanel.Id = id
		case p.Panel != nil:
			p.Panel.Id = &id
		}
	}
	return d, nil
}

// Build returns the dashboard's JSON model, indented, with a trailing
// newline; the same dashboard always gives the same bytes.
func Build() ([]byte, error) {
	d, err := build()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("encode dashboard: %w", err)
	}
	return buf.Bytes(), nil
}
