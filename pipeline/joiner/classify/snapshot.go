package classify

import (
	"fmt"

	"github.com/driftline/driftline/pipeline/stream/snap"
)

// AppendSnapshot appends the engine's state (event clock and owner state)
// to w. Call it between events.
func (e *Engine) AppendSnapshot(w *snap.Writer) {
	w.Header("classify", 1)
	w.Varint(e.maxEventTime)
	w.Varint(e.watermark)
	e.store.AppendSnapshot(w)
}

// LoadSnapshot restores the state AppendSnapshot wrote. The engine's
// options stay its own: a snapshot carries state, not configuration.
func (e *Engine) LoadSnapshot(r *snap.Reader) error {
	r.Header("classify", 1)
	maxEventTime, watermark := r.Varint(), r.Varint()
	if err := r.Err(); err != nil {
		return fmt.Errorf("classify snapshot: %w", err)
	}
	if err := e.store.LoadSnapshot(r); err != nil {
		return err
	}
	e.maxEventTime, e.watermark = maxEventTime, watermark
	return nil
}
