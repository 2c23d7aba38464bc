// Command promql-metrics parses PromQL expressions with Prometheus's own parser and prints the
// metric names each selects, so that a test can check every name the chart's alerting rules and
// dashboard query is one that switchboard exposes.
//
// Input (stdin): a JSON array of expressions. Output (stdout): a JSON array of the same length,
// each {"metrics": [...]} or {"error": "..."}; the exit status is 0 unless the input is unreadable.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

type result struct {
	Metrics []string `json:"metrics,omitempty"`
	Error   string   `json:"error,omitempty"`
}

func main() {
	var exprs []string
	if err := json.NewDecoder(os.Stdin).Decode(&exprs); err != nil {
		fmt.Fprintln(os.Stderr, "promql-metrics: reading a JSON array of expressions:", err)
		os.Exit(2)
	}
	out := make([]result, len(exprs))
	for i, e := range exprs {
		names, err := metricNames(e)
		if err != nil {
			out[i].Error = err.Error()
			continue
		}
		out[i].Metrics = names
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "promql-metrics:", err)
		os.Exit(2)
	}
}

// metricNames are the metric names the expression's selectors match by equality. A selector
// without one (a regular expression, or none at all) is an error: its names cannot be checked.
func metricNames(expr string) ([]string, error) {
	parsed, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var bad error
	parser.Inspect(parsed, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok || bad != nil {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName {
				if m.Type != labels.MatchEqual {
					bad = fmt.Errorf("selector %s matches the metric name with %s: use the name itself", vs, m.Type)
					return nil
				}
				name = m.Value
			}
		}
		if name == "" {
			bad = fmt.Errorf("selector %s names no metric", vs)
			return nil
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		return nil
	})
	if bad != nil {
		return nil, bad
	}
	slices.Sort(names)
	return names, nil
}
