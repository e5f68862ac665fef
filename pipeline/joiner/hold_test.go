package joiner

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestLiveHold: joiners with a live-tail hold, restarted in the middle of
// the stream, write the findings of the joiners without one; the restore
// replays without holding, and the live merge holds releases for the
// streams nobody writes to (commands, telemetry) once per idle spell, so
// some holds run out, and every record is applied in merge order.
func TestLiveHold(t *testing.T) {
	f := newFixture(t)
	sc := scenario{f}
	const group = "joiner-hold"
	reg := prometheus.NewRegistry()
	hold := func(o *Options) { o.LiveHold, o.Registerer = 300*time.Millisecond, reg }
	sc.records()
	stop := f.start(group, hold)
	sc.round(0)
	f.caughtUp(group)
	stop()
	sc.round(1)
	reg = prometheus.NewRegistry()
	stop = f.start(group, hold)
	sc.round(2)
	f.caughtUp(group)
	stop()
	f.wantFindings(scenarioWant)
	if n := mustCounter(t, reg, "driftline_joiner_live_holds_expired_total"); n == 0 {
		t.Error("no live-tail hold ran out, while the commands stream is idle")
	}
	if n := mustCounter(t, reg, "driftline_joiner_late_records_total"); n != 0 {
		t.Errorf("%v records applied behind the merge order", n)
	}
}
