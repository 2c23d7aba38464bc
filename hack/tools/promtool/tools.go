//go:build tools

// Package tools pins promtool, which `make test` runs on the chart's alerting rules
// (`promtool check rules`, `promtool test rules`); see test/monitoring.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
