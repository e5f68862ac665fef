package service

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics declares a component's Prometheus series, one call a series, so
// that a component's metrics read as a list of names and help texts.
// Series are registered with the Registerer given to NewMetrics; a nil
// Registerer leaves them unregistered, for a component that registers
// them itself and wants the error.
type Metrics struct{ f promauto.Factory }

// NewMetrics returns a Metrics registering with reg (nil: none).
func NewMetrics(reg prometheus.Registerer) Metrics { return Metrics{promauto.With(reg)} }

// Counter declares a counter.
func (m Metrics) Counter(name, help string) prometheus.Counter {
	return m.f.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// CounterVec declares a counter with labels.
func (m Metrics) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return m.f.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Gauge declares a gauge.
func (m Metrics) Gauge(name, help string) prometheus.Gauge {
	return m.f.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// GaugeVec declares a gauge with labels.
func (m Metrics) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return m.f.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// GaugeFunc declares a gauge whose value fn reads at each scrape.
func (m Metrics) GaugeFunc(name, help string, fn func() float64) prometheus.GaugeFunc {
	return m.f.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn)
}

// Histogram declares a histogram with the given bucket bounds.
func (m Metrics) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return m.f.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

// HistogramVec declares a histogram with labels.
func (m Metrics) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return m.f.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// Touch creates the series of v for each label value so that dashboards
// and rates see zeros from the first scrape rather than gaps.
func Touch[V interface{ WithLabelValues(...string) T }, T any](v V, values ...string) {
	for _, s := range values {
		v.WithLabelValues(s)
	}
}
