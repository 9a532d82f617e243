// Package promql reads PromQL expressions with the Prometheus parser: it
// checks they parse and lists the metric names they select, so tests can
// hold dashboards and alert rules against a real /metrics scrape.
package promql

import (
	"fmt"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// MetricNames parses expr and returns the metric names of its vector and
// matrix selectors, sorted and without duplicates. A selector without an
// exact name (a regular expression on __name__) is an error: every name must
// be checkable.
func MetricNames(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", expr, err)
	}
	var names []string
	var walkErr error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		if name == "" {
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
		}
		if name == "" {
			walkErr = fmt.Errorf("selector %s in %q has no exact metric name", vs, expr)
			return walkErr
		}
		names = append(names, name)
		return nil
	})
	if walkErr != nil {
		return nil, walkErr
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
