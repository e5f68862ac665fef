package checkpoint

import "github.com/prometheus/client_golang/prometheus"

// metrics are the store's Prometheus series.
type metrics struct {
	saves        *prometheus.CounterVec // by result: ok, error
	savedBytes   prometheus.Counter     // blob bytes of saved checkpoints
	saveSeconds  prometheus.Histogram   // one Save
	loads        *prometheus.CounterVec // by result: hit, miss, error
	loadedBytes  prometheus.Counter     // blob bytes of loaded checkpoints
	loadSeconds  prometheus.Histogram   // one Load
	fetchRecords prometheus.Counter     // records read from the topic by loads and slot lookups
	fetchBytes   prometheus.Counter     // value bytes of those records
	skipped      *prometheus.CounterVec // manifests passed over, by reason
	tombstones   prometheus.Counter     // tombstones written for superseded chunks
}

func newMetrics(reg prometheus.Registerer) *metrics {
	secs := prometheus.ExponentialBuckets(0.001, 2, 18)
	m := &metrics{
		saves:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_checkpoint_saves_total", Help: "Checkpoint saves, by result (ok, error)."}, []string{"result"}),
		savedBytes:   prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_checkpoint_saved_bytes_total", Help: "State bytes of saved checkpoints."}),
		saveSeconds:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "driftline_checkpoint_save_seconds", Help: "Duration of one checkpoint save (chunks and manifest acknowledged).", Buckets: secs}),
		loads:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_checkpoint_loads_total", Help: "Checkpoint loads, by result (hit, miss, error)."}, []string{"result"}),
		loadedBytes:  prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_checkpoint_loaded_bytes_total", Help: "State bytes of loaded checkpoints."}),
		loadSeconds:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "driftline_checkpoint_load_seconds", Help: "Duration of one checkpoint load, hit or miss.", Buckets: secs}),
		fetchRecords: prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_checkpoint_fetched_records_total", Help: "Records read from the checkpoint topic while looking for and loading checkpoints."}),
		fetchBytes:   prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_checkpoint_fetched_bytes_total", Help: "Value bytes of the records read from the checkpoint topic."}),
		skipped:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "driftline_checkpoint_skipped_total", Help: "Checkpoints of the wanted partition passed over by loads, by reason (after_cut: beyond the committed offsets; damaged: chunks missing or not matching the manifest; bad_manifest: undecodable; unusable: whole, but refused by its reader, e.g. a snapshot version it cannot decode)."}, []string{"reason"}),
		tombstones:   prometheus.NewCounter(prometheus.CounterOpts{Name: "driftline_checkpoint_tombstones_total", Help: "Tombstones written for chunk keys a smaller checkpoint superseded."}),
	}
	for _, r := range []string{"ok", "error"} {
		m.saves.WithLabelValues(r)
	}
	for _, r := range []string{"hit", "miss", "error"} {
		m.loads.WithLabelValues(r)
	}
	for _, r := range []string{"after_cut", "damaged", "bad_manifest", "unusable"} {
		m.skipped.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.saves, m.savedBytes, m.saveSeconds, m.loads, m.loadedBytes, m.loadSeconds,
			m.fetchRecords, m.fetchBytes, m.skipped, m.tombstones)
	}
	return m
}
