package reconcile

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/logmerge"
)

// The records a merge still holds after an apply are copies that share no
// memory with the fetch they came in, and keep their content and order.
func TestCompactQueuesDetachesWaitingRecords(t *testing.T) {
	fetched := make([]kgo.Record, 4) // as the client decodes a fetch: one array, one buffer
	buf := []byte("k0v0k1v1k2v2k3v3")
	base := time.Unix(1_700_000_000, 0)
	var recs []*kgo.Record
	for i := range fetched {
		fetched[i] = kgo.Record{Key: buf[4*i : 4*i+2], Value: buf[4*i+2 : 4*i+4], Offset: int64(i), Timestamp: base.Add(time.Duration(i) * time.Second)}
		recs = append(recs, &fetched[i])
	}
	part := &partition{merge: logmerge.NewMerge(numStreams)}
	parts := map[int32]*partition{0: part}

	markQueues(parts)
	part.merge.Push(streamRated, recs, 0)
	countPushed(parts)
	// The usage stream has nothing yet and more to come: the rated
	// lines wait; pop none but note one applied from the front by hand.
	part.merge.Queue[streamRated] = part.merge.Queue[streamRated][1:]
	compactQueues(parts)

	q := part.merge.Queue[streamRated]
	if len(q) != 3 {
		t.Fatalf("%d records queued, want 3", len(q))
	}
	for i, rec := range q {
		want := &fetched[i+1]
		if rec == want {
			t.Fatalf("record %d is still the fetched one", i)
		}
		if rec.Offset != want.Offset || !rec.Timestamp.Equal(want.Timestamp) || !bytes.Equal(rec.Key, want.Key) || !bytes.Equal(rec.Value, want.Value) {
			t.Fatalf("record %d = %+v, want the content of %+v", i, rec, want)
		}
	}
	// Overwriting the fetch buffer changes no waiting record.
	copy(buf, bytes.Repeat([]byte("x"), len(buf)))
	for i, rec := range q {
		if string(rec.Key) != "k"+string(rune('1'+i)) || string(rec.Value) != "v"+string(rune('1'+i)) {
			t.Fatalf("record %d aliases the fetch: key %q value %q", i, rec.Key, rec.Value)
		}
	}
	// A second compaction without a push copies nothing again.
	markQueues(parts)
	countPushed(parts)
	before := q[0]
	compactQueues(parts)
	if part.merge.Queue[streamRated][0] != before {
		t.Fatal("records pushed before the last apply were copied again")
	}
}

// A round of many rows does not leave their capacity behind: the chunks
// of rows a round used are kept for the next, those beyond given back,
// and keptRows of them always kept.
func TestOutputGivesBackASpike(t *testing.T) {
	o := &output{current: map[string]int{}, m: newMetrics(prometheus.NewRegistry()), emit: true}
	round := func(n int) {
		for i := range n {
			o.add(&Mismatch{MismatchID: fmt.Sprint("m", i), Kind: contract.KindUsageNotRated, Status: contract.StatusOpen})
			o.add(&Mismatch{MismatchID: fmt.Sprint("m", i), Kind: contract.KindUsageNotRated, Status: contract.StatusResolved})
		}
		rows := 0
		for _, c := range o.batch.Mismatches {
			rows += len(c)
			for _, m := range c {
				if m.Status != contract.StatusResolved {
					t.Fatalf("row %s holds its first transition, not its latest", m.MismatchID)
				}
			}
		}
		if rows != n || o.rows != n || len(o.current) != n {
			t.Fatalf("%d rows (%d counted), %d ids after adding %d", rows, o.rows, len(o.current), n)
		}
		o.reset()
	}
	kept := func() int { return len(o.spare) * MismatchChunk }
	round(10 * keptRows)
	if c := kept(); c < 10*keptRows {
		t.Fatalf("a round of %d rows left a capacity of %d", 10*keptRows, c)
	}
	round(keptRows / 2) // fewer: the spike's chunks given back
	if c := kept(); c != keptRows {
		t.Fatalf("after a round of a twentieth of the capacity: capacity %d, want %d", c, keptRows)
	}
	round(keptRows / 4)
	if c := kept(); c != keptRows {
		t.Fatalf("a round of the usual size changed the capacity to %d, want %d", c, keptRows)
	}
}
