package logmerge

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
)

func TestRoundsLimits(t *testing.T) {
	r := Rounds{Interval: 500 * time.Millisecond, Records: 100, CatchUpInterval: 3 * time.Second, CatchUpRecords: 1000}
	for _, c := range []struct {
		backlog int64
		d       time.Duration
		n       int
	}{
		{0, 500 * time.Millisecond, 100},
		{100, 500 * time.Millisecond, 100}, // one regular round left
		{101, 3 * time.Second, 100},        // never below a regular round
		{1000, 3 * time.Second, 500},       // half the backlog: the last rounds shrink
		{2000, 3 * time.Second, 1000},      // at most CatchUpRecords
		{1 << 40, 3 * time.Second, 1000},
	} {
		if d, n := r.Limits(c.backlog); d != c.d || n != c.n {
			t.Errorf("backlog %d: %v, %d; want %v, %d", c.backlog, d, n, c.d, c.n)
		}
	}
	// Off when the catch-up interval is not above the regular one; a
	// catch-up round never takes fewer records than a regular one.
	r.CatchUpInterval = r.Interval
	if d, n := r.Limits(1 << 40); d != r.Interval || n != r.Records {
		t.Errorf("catching up while off: %v, %d", d, n)
	}
	r.CatchUpInterval, r.CatchUpRecords = time.Second, 10
	if _, n := r.Limits(1 << 40); n != r.Records {
		t.Errorf("catch-up round of %d records, below the regular %d", n, r.Records)
	}
}

// TestRoundsDrain: a round that starts behind by a quarter of a regular
// round or more ends once it has caught up, long before its interval; one
// that starts with less (a consumer keeping up) keeps its interval. Both
// apply everything there is.
func TestRoundsDrain(t *testing.T) {
	r := Rounds{Interval: 10 * time.Second, Records: 400, CatchUpInterval: 20 * time.Second, CatchUpRecords: 4000}
	for _, c := range []struct {
		backlog int64
		drains  bool
	}{{0, false}, {99, false}, {100, true}, {1 << 40, true}} {
		if got := r.drains(c.backlog); got != c.drains {
			t.Errorf("drains(%d) = %v", c.backlog, got)
		}
	}

	brokers, names := testenv.Kafka(t, 1)
	topic := names.Observations
	ctx := context.Background()
	prod := testenv.KafkaClient(t, brokers, kgo.DefaultProduceTopic(topic))
	produce := func(n int) {
		t.Helper()
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Value: []byte("v")}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl := testenv.KafkaClient(t, brokers, fromStart(topic))
	var applied, end int64
	apply := func(fetches kgo.Fetches) (int, int64) {
		n := fetches.NumRecords()
		applied += int64(n)
		return n, end - applied
	}

	// Behind by 150 records: the round drains them and ends.
	produce(150)
	end = 150
	start := time.Now()
	catchUp, after, closed := r.Round(ctx, cl, 150, apply)
	if took := time.Since(start); took >= r.Interval || closed || catchUp || after != 0 || applied != 150 {
		t.Fatalf("behind by 150: round of %v (interval %v), catch-up %v, backlog after %d, applied %d, closed %v",
			took, r.Interval, catchUp, after, applied, closed)
	}

	// Behind by 50, under a quarter: the round runs its interval.
	r.Interval = 300 * time.Millisecond
	produce(50)
	end = 200
	start = time.Now()
	_, after, _ = r.Round(ctx, cl, 50, apply)
	if took := time.Since(start); took < r.Interval || after != 0 || applied != 200 {
		t.Fatalf("behind by 50: round of %v (interval %v), backlog after %d, applied %d", took, r.Interval, after, applied)
	}

	// Work pending (a processor that bounds its rounds): the round ends
	// after its first apply, and that apply's poll does not wait for
	// records, though none came.
	applies := 0
	counted := func(fetches kgo.Fetches) (int, int64) { applies++; return apply(fetches) }
	r.Pending = func() bool { return true }
	start = time.Now()
	r.Round(ctx, cl, 0, counted)
	if took := time.Since(start); took >= r.Interval/2 || applies != 1 {
		t.Fatalf("work pending: round of %v (interval %v), %d applies", took, r.Interval, applies)
	}
}

// TestRoundTakesWholeFetches: a round hands apply whole fetches, however
// few records its count leaves. Two streams whose timestamps interleave
// arrive in one fetch; had a poll taken only the first stream's records,
// the merge, which has heard nothing of the other stream yet, would have
// released them ahead of the other's earlier ones.
func TestRoundTakesWholeFetches(t *testing.T) {
	brokers, names := testenv.Kafka(t, 1)
	topics := []string{names.PlatformRecords, names.Observations}
	ctx := context.Background()
	prod := testenv.KafkaClient(t, brokers)
	base := time.UnixMilli(1_800_000_000_000)
	var recs []*kgo.Record
	for i := range 4 { // records at 0 and 2 ms, observations at 1 and 3 ms
		recs = append(recs, &kgo.Record{Topic: topics[i%2], Timestamp: base.Add(time.Duration(i) * time.Millisecond), Value: []byte("v")})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl := testenv.KafkaClient(t, brokers, fromStart(topics...), kgo.FetchMinBytes(1), kgo.FetchMaxWait(time.Second))
	// Wait until one fetch holds all four, so the round's first poll finds
	// them buffered together.
	testenv.CheckFor(t, 10*time.Second, func() error {
		if n := cl.BufferedFetchRecords(); n < 4 {
			return fmt.Errorf("%d of 4 records buffered", n)
		}
		return nil
	})

	m := NewMerge(len(topics))
	var got []time.Time
	apply := func(fetches kgo.Fetches) (int, int64) {
		Fetched(fetches, func(topic string, _ int32, rs []*kgo.Record, unfetched int64) {
			m.Push(slices.Index(topics, topic), rs, unfetched)
		}, nil)
		n := 0
		for r, _ := m.Pop(); r != nil; r, _ = m.Pop() {
			got = append(got, r.Timestamp)
			n++
		}
		return n, m.Backlog()
	}
	r := Rounds{Interval: 2 * time.Second, Records: 1}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for len(got) < 4 && rctx.Err() == nil {
		r.Round(rctx, cl, 0, apply)
	}
	if len(got) != 4 || !slices.IsSortedFunc(got, time.Time.Compare) {
		t.Fatalf("applied at %v, want the four records in timestamp order", got)
	}
}

// TestRoundReleasesAHeldRecord: a round hands apply its last poll at the
// round's deadline even when no fetch came, so a record a merge held at
// the live tail is released about a round after the hold ran out, with
// nothing more fetched.
func TestRoundReleasesAHeldRecord(t *testing.T) {
	brokers, names := testenv.Kafka(t, 1)
	topics := []string{names.PlatformRecords, names.Observations}
	ctx := context.Background()
	prod := testenv.KafkaClient(t, brokers)
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topics[1], Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl := testenv.KafkaClient(t, brokers, fromStart(topics...), kgo.FetchMaxWait(FetchMaxWait))

	const hold = 300 * time.Millisecond
	m := NewMerge(len(topics))
	m.SetHold(hold, nil)
	var stamped, fetched, released time.Time
	apply := func(fetches kgo.Fetches) (int, int64) {
		Fetched(fetches, func(topic string, _ int32, rs []*kgo.Record, unfetched int64) {
			if len(rs) != 0 {
				stamped, fetched = rs[0].Timestamp, time.Now()
			}
			m.Push(slices.Index(topics, topic), rs, unfetched)
		}, nil)
		n := 0
		for r, _ := m.Pop(); r != nil; r, _ = m.Pop() {
			released = time.Now()
			n++
		}
		return n, m.Backlog()
	}
	r := Rounds{Interval: 100 * time.Millisecond, Records: 1000}
	deadline := time.Now().Add(10 * time.Second)
	for released.IsZero() && time.Now().Before(deadline) {
		r.Round(ctx, cl, 0, apply)
	}
	if released.IsZero() {
		t.Fatal("the held record was never released")
	}
	// Not before the hold has passed since the record's timestamp (a
	// record older than the hold is never held, so the release may come
	// less than the hold after the fetch); not after the hold, a round
	// and slack for a loaded machine since the fetch.
	if took := released.Sub(stamped); took < hold {
		t.Fatalf("released %v after its timestamp, want at least the hold (%v)", took, hold)
	}
	if took := released.Sub(fetched); took > hold+r.Interval+time.Second {
		t.Fatalf("released %v after it was fetched, want the hold (%v) and up to a round more", took, hold)
	}
}
