package deploy

import (
	_ "embed" // for the alert rules
	"errors"
	"fmt"

	"sigs.k8s.io/yaml"
)

// alertRules is the plain Prometheus rules file, the source of
// monitoring/prometheusrule.yaml.
//
//go:embed monitoring/prometheus/clustershard.rules.yaml
var alertRules []byte

// AlertExpressions returns the PromQL expression of every alert of
// deploy/monitoring/prometheus/clustershard.rules.yaml, by alert name, so a
// test can hold the alerts against the metrics a running replica exports.
// Recording rules are left out; a rule without an expression or an alert
// defined twice is an error.
func AlertExpressions() (map[string]string, error) {
	var rf struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(alertRules, &rf); err != nil {
		return nil, fmt.Errorf("alert rules: %w", err)
	}
	out := map[string]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if r.Expr == "" {
				return nil, fmt.Errorf("alert rules: alert %s has no expression", r.Alert)
			}
			if _, dup := out[r.Alert]; dup {
				return nil, fmt.Errorf("alert rules: alert %s is defined twice", r.Alert)
			}
			out[r.Alert] = r.Expr
		}
	}
	if len(out) == 0 {
		return nil, errors.New("alert rules: no alert")
	}
	return out, nil
}
