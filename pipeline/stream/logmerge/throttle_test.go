package logmerge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
)

// twoStreams returns a throttled merge view of two streams, with its
// queues and pause flags.
func twoStreams() (Streams, [][]*kgo.Record, []bool) {
	q, mo, pa := make([][]*kgo.Record, 2), make([]bool, 2), make([]bool, 2)
	return Streams{Queue: q, More: mo, Paused: pa}, q, pa
}

// TestThrottleCheck: a queue reaching High pauses its stream, a paused one
// stays paused down to Low and is resumed below it, and Apply hands the
// decisions to the client once.
func TestThrottleCheck(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	m, _, pa := twoStreams()
	topics := []string{"a", "b"}
	fill := func(s, n int) {
		m.Queue[s] = m.Queue[s][:0]
		for i := range n {
			m.Queue[s] = append(m.Queue[s], rec(int64(i), int64(i)))
		}
	}
	th := Throttle{High: 4, Low: 2}

	fill(0, 4)
	fill(1, 3)
	th.Check(m, topics, 7)
	if p, r := th.Apply(cl); p != 1 || r != 0 || !pa[0] || pa[1] {
		t.Fatalf("paused %d resumed %d flags %v, want stream 0 paused", p, r, pa)
	}
	if got := cl.PauseFetchPartitions(nil); len(got) != 1 || len(got["a"]) != 1 || got["a"][0] != 7 {
		t.Fatalf("client pauses %v, want a/7", got)
	}
	fill(0, 2) // at Low: still paused
	th.Check(m, topics, 7)
	if p, r := th.Apply(cl); p != 0 || r != 0 || !pa[0] {
		t.Fatalf("paused %d resumed %d flags %v at Low", p, r, pa)
	}
	fill(0, 1)
	th.Check(m, topics, 7)
	if p, r := th.Apply(cl); p != 0 || r != 1 || pa[0] {
		t.Fatalf("paused %d resumed %d flags %v below Low", p, r, pa)
	}
	if got := cl.PauseFetchPartitions(nil); len(got) != 0 {
		t.Fatalf("client still pauses %v", got)
	}
}

// TestThrottleMerge: a stream whose records all come after the other's
// (observations behind a backlog of platform records) is paused while the
// merge waits for the other, the queues stay bounded, and every record is
// still applied, in timestamp order, once: pausing moves fetches, never
// records.
func TestThrottleMerge(t *testing.T) {
	brokers, names := testenv.Kafka(t, 1)
	early, late := names.PlatformRecords, names.Observations
	ctx := context.Background()
	prod := testenv.KafkaClient(t, brokers, kgo.ProducerLinger(0))
	const n = 6000
	base := time.UnixMilli(1_700_000_000_000)
	var recs []*kgo.Record
	for i := range n {
		v := []byte(fmt.Sprintf("%0200d", i)) // ~200 bytes, so a fetch holds a few hundred
		recs = append(recs,
			&kgo.Record{Topic: early, Value: v, Timestamp: base.Add(time.Duration(i) * time.Millisecond)},
			&kgo.Record{Topic: late, Value: v, Timestamp: base.Add(time.Duration(n+i) * time.Millisecond)})
	}
	for len(recs) > 0 { // batches of 50 records per topic, so fetches can stop between them
		k := min(100, len(recs))
		if err := prod.ProduceSync(ctx, recs[:k]...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		recs = recs[k:]
	}

	cl := testenv.KafkaClient(t, brokers, fromStart(early, late),
		kgo.FetchMaxBytes(64<<10), kgo.FetchMaxPartitionBytes(32<<10), kgo.KeepControlRecords())
	m, q, pa := twoStreams()
	topics := []string{early, late}
	th := Throttle{High: 1000, Low: 200}
	pauses, maxQueued, maxPush, got := 0, 0, 0, 0
	var last time.Time
	deadline := time.Now().Add(30 * time.Second)
	for got < 2*n {
		if time.Now().After(deadline) {
			t.Fatalf("stalled at %d of %d records (queues %d/%d, paused %v)", got, 2*n, len(q[0]), len(q[1]), pa)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollRecords(pctx, 0)
		cancel()
		Fetched(fetches, func(topic string, _ int32, recs []*kgo.Record, unfetched int64) {
			s := 0
			if topic == late {
				s = 1
			}
			if pa[s] {
				t.Errorf("%d records of paused %s delivered", len(recs), topic)
			}
			maxPush = max(maxPush, len(recs))
			m.Push(s, recs, unfetched > 0)
		}, func(topic string, p int32, err error) { t.Errorf("fetch %s/%d: %v", topic, p, err) })
		maxQueued = max(maxQueued, len(q[1]))
		for r, _ := m.Pop(); r != nil; r, _ = m.Pop() {
			if r.Timestamp.Before(last) {
				t.Fatalf("record at %v after %v", r.Timestamp, last)
			}
			last = r.Timestamp
			got++
		}
		th.Check(m, topics, 0)
		p, _ := th.Apply(cl)
		pauses += p
	}
	if pauses == 0 {
		t.Fatal("the stream ahead was never paused")
	}
	// The fetch that crosses High is the last one delivered.
	if maxQueued >= th.High+maxPush {
		t.Fatalf("queue of the stream ahead reached %d records (High %d, largest fetch %d)", maxQueued, th.High, maxPush)
	}
	if len(pa) != 2 || pa[0] || pa[1] || m.Buffered() != 0 {
		t.Fatalf("left paused %v, buffered %d", pa, m.Buffered())
	}
}
