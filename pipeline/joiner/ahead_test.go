package joiner

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
)

// TestApplyAhead checks that applying records through applyAhead's
// read-ahead changes nothing: the same rows and state as applying them one
// by one, every record handed to done once and in order, for runs shorter
// and longer than the read-ahead, and every event applied counted.
func TestApplyAhead(t *testing.T) {
	recs := fleetRecords(t, 20_000)
	for _, n := range []int{0, 1, identityAhead, slotAhead + 1, readAhead, 2*readAhead + 3, len(recs)} {
		jd, direct := benchJoiner(t)
		for _, r := range recs[:n] {
			jd.apply(direct, r)
		}
		ja, ahead := benchJoiner(t)
		rest := recs[:n]
		var done []*kgo.Record
		got := ja.applyAhead(ahead, func() *kgo.Record {
			if len(rest) == 0 {
				return nil
			}
			r := rest[0]
			rest = rest[1:]
			return r
		}, func(r *kgo.Record) {
			done = append(done, r)
		})
		if got != n || !reflect.DeepEqual(done, recs[:n:n]) && n > 0 {
			t.Fatalf("%d records: applied %d, done with %d (in order: %t)", n, got, len(done), reflect.DeepEqual(done, recs[:n:n]))
		}
		if direct.events != ahead.events || ahead.ahead.recs != [readAhead]*kgo.Record{} {
			t.Fatalf("%d records: %d events applied directly, %d ahead (read-ahead left holding records: %t)", n, direct.events, ahead.events, ahead.ahead.recs != [readAhead]*kgo.Record{})
		}
		// The events applied are counted by stream once applyAhead
		// returns.
		var counted float64
		for _, c := range ja.eventCounters {
			counted += counterValue(c)
		}
		if counted != float64(ahead.events) || ahead.uncounted != [numStreams]uint64{} {
			t.Fatalf("%d records: driftline_joiner_events_total counts %v of %d events applied (%v not yet)", n, counted, ahead.events, ahead.uncounted)
		}
		// A record with a key goes through every step when
		// readAhead-stateAhead records follow it: the last step runs
		// as the last of them is read.
		// A node's key goes through the node tracker's steps too.
		keyed, nodeKeyed := 0, 0
		for i, r := range recs[:n] {
			if len(r.Key) != 0 && i+readAhead-stateAhead < n {
				keyed++
				if nodeagent.IsNodeKey(r.Key) {
					nodeKeyed++
				}
			}
		}
		if ahead.ahead.states != uint64(keyed) || ahead.ahead.nodeIDs != uint64(nodeKeyed) {
			t.Fatalf("%d records: %d states and %d node ids prefetched, want %d and %d", n, ahead.ahead.states, ahead.ahead.nodeIDs, keyed, nodeKeyed)
		}
		if n == len(recs) && nodeKeyed == 0 {
			t.Fatalf("the fleet's %d records have no node's key: the node tracker's steps went untried", n)
		}
		d, a := direct.live.batch, ahead.live.batch
		dh, ah := &direct.held, &ahead.held
		if !reflect.DeepEqual(dh.current.All(), ah.current.All()) || !reflect.DeepEqual(d.History.All(), a.History.All()) || !reflect.DeepEqual(dh.nodes.All(), ah.nodes.All()) {
			t.Fatalf("%d records: rows differ: %d/%d/%d current/history/nodes directly, %d/%d/%d ahead", n,
				dh.current.Len(), d.History.Len(), dh.nodes.Len(), ah.current.Len(), a.History.Len(), ah.nodes.Len())
		}
		if n == len(recs) && (d.History.Len() == 0 || dh.nodes.Len() == 0) {
			t.Fatalf("the fleet produced %d finding transitions and %d node rows: nothing compared", d.History.Len(), dh.nodes.Len())
		}
	}
}
