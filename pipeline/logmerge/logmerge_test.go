package logmerge

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func rec(ms int64, off int64) *kgo.Record {
	return &kgo.Record{Timestamp: time.UnixMilli(ms), Offset: off}
}

func TestPopOrderTiesAndWaits(t *testing.T) {
	var (
		q   [3][]*kgo.Record
		mo  [3]bool
		ws  [3]time.Time
		ep  [3]int
		now = time.Unix(100, 0)
	)
	m := Streams{Queue: q[:], More: mo[:], WaitingSince: ws[:], EmptyPolls: ep[:]}
	m.Push(0, []*kgo.Record{rec(10, 0), rec(30, 1)}, false)
	m.Push(2, []*kgo.Record{rec(10, 0)}, false)
	m.Push(1, nil, true) // stream 1 has records not fetched yet: wait
	if r, s := m.Pop(now); r != nil {
		t.Fatalf("popped %v from %d while stream 1 may hold an earlier record", r, s)
	}
	m.Push(1, []*kgo.Record{rec(10, 0), rec(20, 1)}, false)
	var got []int
	for r, s := m.Pop(now); r != nil; r, s = m.Pop(now) {
		got = append(got, s)
	}
	// 10ms: streams 0, 1, 2 (ties by stream); 20ms: 1; 30ms: 0.
	if want := []int{0, 1, 2, 1, 0}; len(got) != len(want) || got[0] != 0 || got[1] != 1 || got[2] != 2 || got[3] != 1 || got[4] != 0 {
		t.Fatalf("order %v, want %v", got, want)
	}
	if m.Buffered() != 0 {
		t.Fatalf("buffered %d", m.Buffered())
	}
	// A stream that says it has more but stays silent is given up after
	// StuckAfter and StuckPolls polls that brought nothing; a zero now
	// waits for ever.
	m.Push(0, []*kgo.Record{rec(40, 2)}, false)
	m.Push(1, nil, true)
	if r, _ := m.Pop(time.Time{}); r != nil {
		t.Fatal("zero now gave up on a stream")
	}
	if r, _ := m.Pop(now); r != nil {
		t.Fatal("gave up at once")
	}
	if r, _ := m.Pop(now.Add(StuckAfter)); r != nil {
		t.Fatal("gave up after StuckAfter without a poll (the consumer was busy, not fetching)")
	}
	for range StuckPolls {
		m.Polled()
	}
	if r, s := m.Pop(now.Add(StuckAfter)); r == nil || s != 0 {
		t.Fatal("still waiting after StuckAfter and StuckPolls empty polls")
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
