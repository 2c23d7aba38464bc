// Package boundmetric holds one series of a Prometheus vector, bound on its first use, for
// metrics counted on the request path. WithLabelValues hashes and validates its label values
// and looks the series up under a lock: per request, that cost more than all the rest of the
// instrumentation. Bound lazily, only series that happen are exported.
package boundmetric

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Counter is one series of a CounterVec. Its zero value with Vec and Labels set is ready.
type Counter struct {
	Vec    *prometheus.CounterVec
	Labels []string

	once sync.Once
	c    prometheus.Counter
}

// Inc adds one to the series.
func (b *Counter) Inc() {
	b.once.Do(func() { b.c = b.Vec.WithLabelValues(b.Labels...) })
	b.c.Inc()
}

// Observer is one series of a HistogramVec with one label. Its zero value with Vec and Label
// set is ready.
type Observer struct {
	Vec   *prometheus.HistogramVec
	Label string

	once sync.Once
	o    prometheus.Observer
}

// Observe adds an observation to the series.
func (b *Observer) Observe(v float64) {
	b.once.Do(func() { b.o = b.Vec.WithLabelValues(b.Label) })
	b.o.Observe(v)
}
