package joiner

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestLiveHold: joiners with a live-tail hold, restarted in the middle of
// the stream, write the findings of the joiners without one; the restore
// replays without holding, and the live merge holds the records it
// fetches at the live tail for the streams nobody writes to (commands,
// telemetry) once per idle spell, so some holds run out, and every record
// is applied in merge order.
func TestLiveHold(t *testing.T) {
	f := newFixture(t)
	sc := scenario{f}
	const group = "joiner-hold"
	var regs []*prometheus.Registry
	// Longer than a fetch takes, so that records are fetched while they
	// are younger than the hold and held.
	hold := func(o *Options) {
		regs = append(regs, prometheus.NewRegistry())
		o.LiveHold, o.Registerer = 2*time.Second, regs[len(regs)-1]
	}
	sc.records()
	stop := f.start(group, hold)
	sc.round(0)
	f.caughtUp(group)
	sc.round(1) // at the live tail: fetched at once, and held
	f.caughtUp(group)
	stop()
	stop = f.start(group, hold)
	sc.round(2)
	f.caughtUp(group)
	stop()
	f.wantFindings(scenarioWant)
	var expired, late float64
	for _, reg := range regs {
		expired += mustCounter(t, reg, "driftline_joiner_live_holds_expired_total")
		late += mustCounter(t, reg, "driftline_joiner_late_records_total")
	}
	if expired == 0 {
		t.Error("no live-tail hold ran out, while the commands stream is idle")
	}
	if late != 0 {
		t.Errorf("%v records applied behind the merge order", late)
	}
}
