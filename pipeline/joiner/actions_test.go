package joiner

import (
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// TestActionBookSnapshot: the book survives a snapshot whole, and a
// command id seen before is known after the restore.
func TestActionBookSnapshot(t *testing.T) {
	b := newActionBook()
	b.findings["orphan_provider_resource:maas/n1"] = &findingActions{provider: "maas", providerID: "n1", class: drift.Orphan,
		acknowledgedBy: "HUMAN::a", assignee: "ops", suppressedUntil: time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC).UnixNano(),
		state: contract.ActionPending, lastActionID: "cmd-1", deadline: time.Date(2026, 11, 21, 10, 10, 0, 0, time.UTC).UnixNano()}
	b.quarantined["maas/n1"] = true
	b.applied["cmd-1"] = struct{}{}
	b.recompute()
	var w snap.Writer
	b.appendSnapshot(&w)
	got := newActionBook()
	if err := got.loadSnapshot(snap.NewReader(w.B)); err != nil {
		t.Fatal(err)
	}
	fa := got.findings["orphan_provider_resource:maas/n1"]
	if fa == nil || *fa != *b.findings["orphan_provider_resource:maas/n1"] || !got.quarantined["maas/n1"] || got.due != b.due {
		t.Fatalf("restored book %+v, want %+v", got, b)
	}
	if _, ok := got.applied["cmd-1"]; !ok {
		t.Fatal("the applied command ids were not restored")
	}
}
