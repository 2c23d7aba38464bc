package boundmetric

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestBoundOnFirstUse: a series is exported once it is used, not before, and counts what the
// vector's own series would.
func TestBoundOnFirstUse(t *testing.T) {
	counters := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c", Help: "c"}, []string{"a", "b"})
	histograms := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h", Help: "h"}, []string{"a"})
	c := &Counter{Vec: counters, Labels: []string{"x", "y"}}
	o := &Observer{Vec: histograms, Label: "x"}
	if n := testutil.CollectAndCount(counters) + testutil.CollectAndCount(histograms); n != 0 {
		t.Fatalf("%d series exported before any use", n)
	}
	c.Inc()
	c.Inc()
	o.Observe(0.5)
	if got := testutil.ToFloat64(counters.WithLabelValues("x", "y")); got != 2 {
		t.Errorf("the counter's series is %v, want 2", got)
	}
	if n := testutil.CollectAndCount(counters) + testutil.CollectAndCount(histograms); n != 2 {
		t.Errorf("%d series exported, want the two used", n)
	}
}
