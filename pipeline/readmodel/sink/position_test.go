package sink

import (
	"context"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/stream/producers"
)

// TestOlderPositionWrittenLaterLoses: the progress row and the rejection
// counts of an older position, written after a newer one (a member that
// lost the partition while its write was in flight, or whose clock is
// ahead), do not replace the newer ones.
func TestOlderPositionWrittenLaterLoses(t *testing.T) {
	ctx := context.Background()
	conn := readModel(t)
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	rej := func(n uint64) []readmodel.ProducerRejection {
		return []readmodel.ProducerRejection{{Consumer: "joiner", Partition: 3,
			Count: producers.Count{Producer: "gw-1", Reason: contract.ReasonClockSkew, Events: n, LastAt: t0}}}
	}
	newer := &Batch{Progress: []Progress{{Consumer: "joiner", Partition: 3, Watermark: t0.Add(10 * time.Minute), Events: 2000, FindingsOpen: 7, Position: 2100}},
		Producers: rej(20)}
	older := &Batch{Progress: []Progress{{Consumer: "joiner", Partition: 3, Watermark: t0, Events: 1000, FindingsOpen: 3, Position: 1050}},
		Producers: rej(10)}
	c := NewClickHouse(conn)
	c.now = func() time.Time { return t0.Add(20 * time.Minute) }
	if err := c.Write(ctx, newer); err != nil {
		t.Fatal(err)
	}
	c.now = func() time.Time { return t0.Add(20*time.Minute + time.Second) }
	if err := c.Write(ctx, older); err != nil {
		t.Fatal(err)
	}
	got := testenv.Strings(t, conn, `SELECT concat(toString(events), '|', toString(findings_open), '|', toString(watermark))
		FROM consumer_progress FINAL WHERE consumer = 'joiner' AND partition = 3`)
	if len(got) != 1 || got[0] != "2000|7|2026-11-21 12:10:00" {
		t.Errorf("consumer_progress FINAL = %q, want the newer position's row 2000|7|2026-11-21 12:10:00", got)
	}
	gotRej := testenv.Strings(t, conn, `SELECT toString(events) FROM producer_rejections FINAL WHERE consumer = 'joiner' AND partition = 3`)
	if len(gotRej) != 1 || gotRej[0] != "20" {
		t.Errorf("producer_rejections FINAL events = %q, want the newer cumulative count 20", gotRej)
	}
	// A row versioned by the time of its write, as before positions
	// versioned them, loses to a row of a position.
	if v := readmodel.PositionVersion(0); v <= uint64(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()) {
		t.Errorf("PositionVersion(0) = %d, below the write times of the rows before it", v)
	}
}
