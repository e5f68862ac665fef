package logmerge

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func rec(ms int64, off int64) *kgo.Record {
	return &kgo.Record{Timestamp: time.UnixMilli(ms), Offset: off}
}

// fromStart consumes partition 0 of each of topics from its first offset.
func fromStart(topics ...string) kgo.Opt {
	start := map[string]map[int32]kgo.Offset{}
	for _, topic := range topics {
		start[topic] = map[int32]kgo.Offset{0: kgo.NewOffset().AtStart()}
	}
	return kgo.ConsumePartitions(start)
}

func TestPopOrderTiesAndWaits(t *testing.T) {
	var (
		q  [3][]*kgo.Record
		mo [3]bool
	)
	m := Streams{Queue: q[:], More: mo[:]}
	m.Push(0, []*kgo.Record{rec(10, 0), rec(30, 1)}, false)
	m.Push(2, []*kgo.Record{rec(10, 0)}, false)
	m.Push(1, nil, true) // stream 1 has records not fetched yet: wait
	if r, s := m.Pop(); r != nil {
		t.Fatalf("popped %v from %d while stream 1 may hold an earlier record", r, s)
	}
	m.Push(1, []*kgo.Record{rec(10, 0), rec(20, 1)}, false)
	var got []int
	for r, s := m.Pop(); r != nil; r, s = m.Pop() {
		got = append(got, s)
	}
	// 10ms: streams 0, 1, 2 (ties by stream); 20ms: 1; 30ms: 0.
	if want := []int{0, 1, 2, 1, 0}; len(got) != len(want) || got[0] != 0 || got[1] != 1 || got[2] != 2 || got[3] != 1 || got[4] != 0 {
		t.Fatalf("order %v, want %v", got, want)
	}
	if m.Buffered() != 0 {
		t.Fatalf("buffered %d", m.Buffered())
	}
	// A stream that says it has more is waited for until a fetch says
	// otherwise (its last records may be markers, which Data drops).
	m.Push(0, []*kgo.Record{rec(40, 2)}, false)
	m.Push(1, nil, true)
	if r, _ := m.Pop(); r != nil {
		t.Fatal("gave up on a stream with more records")
	}
	m.Push(1, Data(nil), false)
	if r, s := m.Pop(); r == nil || s != 0 {
		t.Fatal("still waiting after the stream was read to its end")
	}
}

// TestReady: Ready counts exactly the records Pop returns before it waits,
// on random queues (non-decreasing timestamps per stream, many ties, some
// streams with more records to come, some empty).
func TestReady(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		var (
			q  [3][]*kgo.Record
			mo [3]bool
		)
		m := Streams{Queue: q[:], More: mo[:]}
		for s := range q {
			ms := int64(rng.IntN(5))
			var recs []*kgo.Record
			for i := range rng.IntN(6) {
				ms += int64(rng.IntN(3)) // equal timestamps often
				recs = append(recs, rec(ms, int64(i)))
			}
			m.Push(s, recs, rng.IntN(2) == 0)
		}
		want := m.Ready()
		got := 0
		for r, _ := m.Pop(); r != nil; r, _ = m.Pop() {
			got++
		}
		if got != want {
			t.Fatalf("trial %d: Pop returned %d records, Ready said %d", trial, got, want)
		}
		if m.Ready() != 0 {
			t.Fatalf("trial %d: Ready %d after Pop waited", trial, m.Ready())
		}
	}
}

// TestData: a slice without transaction markers is returned as it is (no
// copy). Markers themselves are dropped in TestReadToTransactionalTail,
// with a real transactional producer (kgo builds their attributes).
func TestData(t *testing.T) {
	plain := []*kgo.Record{rec(1, 0), rec(2, 1)}
	if got := Data(plain); &got[0] != &plain[0] || len(got) != 2 {
		t.Fatal("a slice without markers is not returned as it is")
	}
}
