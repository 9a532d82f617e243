package dashboard

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// Query is one PromQL expression of a dashboard panel.
type Query struct {
	// Row is the title of the row the panel is in.
	Row string
	// Panel is the panel's title.
	Panel string
	// RefID is the query's reference within its panel (A, B, ...).
	RefID string
	// Expr is the PromQL expression, exactly as Grafana sends it.
	Expr string
	// Instant is true for an instant query, false for a range query.
	Instant bool
}

// Queries returns every query of every panel, in layout order, with the
// row and panel it belongs to.
func Queries() ([]Query, error) {
	d, err := build()
	if err != nil {
		return nil, err
	}
	var out []Query
	rowTitle := ""
	for _, p := range d.Panels {
		if p.RowPanel != nil {
			rowTitle = deref(p.RowPanel.Title)
			continue
		}
		if p.Panel == nil {
			continue
		}
		for _, t := range p.Panel.Targets {
			q, ok := t.(prometheus.Dataquery)
			if !ok {
				return nil, fmt.Errorf("panel %q: query of type %T, want a Prometheus query", deref(p.Panel.Title), t)
			}
			out = append(out, Query{
				Row:     rowTitle,
				Panel:   deref(p.Panel.Title),
				RefID:   deref(q.RefId),
				Expr:    q.Expr,
				Instant: q.Instant != nil && *q.Instant,
			})
		}
	}
	return out, nil
}

// deref returns *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
