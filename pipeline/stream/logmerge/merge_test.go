package logmerge

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMergeOrderIndependentOfChunks checks the merge's promise: however
// the fetches chunk the three streams, the records come out in the order
// of a merge that sees each stream whole.
func TestMergeOrderIndependentOfChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	const numStreams = 3
	var streams [numStreams][]*kgo.Record
	for s := range numStreams {
		at := base
		for i := range 200 + rng.IntN(200) {
			// Mostly rising timestamps with ties and some going back, as
			// several gateways and redeliveries produce.
			at = at.Add(time.Duration(rng.IntN(5)-1) * time.Millisecond)
			streams[s] = append(streams[s], &kgo.Record{Offset: int64(i), Timestamp: at, Value: []byte{byte(s)}})
		}
	}
	order := func(chunked bool) []*kgo.Record {
		// As after a restore: every stream with records beyond the start
		// is waited for until its first fetch.
		m := NewMerge(numStreams)
		for s := range numStreams {
			m.More[s], m.Unfetched[s] = len(streams[s]) > 0, int64(len(streams[s]))
		}
		var pos [numStreams]int
		var out []*kgo.Record
		for {
			s := rng.IntN(numStreams)
			n := len(streams[s]) - pos[s]
			if chunked && n > 0 {
				n = 1 + rng.IntN(min(n, 40))
			}
			m.Push(s, streams[s][pos[s]:pos[s]+n], int64(len(streams[s])-pos[s]-n))
			pos[s] += n
			for r, _ := m.Pop(); r != nil; r, _ = m.Pop() {
				out = append(out, r)
			}
			want := 0
			for s := range numStreams {
				want += len(streams[s]) - pos[s]
			}
			if got := m.Backlog(); got != int64(want+m.Buffered()) {
				t.Fatalf("backlog %d, want %d unfetched + %d queued", got, want, m.Buffered())
			}
			if len(out) == len(streams[0])+len(streams[1])+len(streams[2]) {
				return out
			}
		}
	}
	whole := order(false)
	for i := range 20 {
		if got := order(true); !slices.Equal(got, whole) {
			t.Fatalf("chunking %d changed the order", i)
		}
	}
	for i := 1; i < len(whole); i++ {
		if whole[i].Value[0] == whole[i-1].Value[0] && whole[i].Offset < whole[i-1].Offset {
			t.Fatalf("stream %d out of offset order at %d", whole[i].Value[0], i)
		}
	}
}

// TestMergeWaitsForAStreamWithMore checks that a stream known to have
// more records holds the others back, and that only a wall clock lets the
// merge give up on it.
func TestMergeWaitsForAStreamWithMore(t *testing.T) {
	const records, observations, telemetry = 0, 1, 2
	base := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	m := NewMerge(3)
	m.Push(observations, []*kgo.Record{{Offset: 0, Timestamp: base.Add(time.Second)}}, 0)
	m.More[telemetry] = true
	if r, _ := m.Pop(); r != nil {
		t.Fatal("popped while telemetry has more records")
	}
	m.Push(telemetry, []*kgo.Record{{Offset: 7, Timestamp: base}}, 0)
	if r, s := m.Pop(); r == nil || s != telemetry {
		t.Fatalf("got stream %d, want the earlier telemetry record", s)
	}
	if r, s := m.Pop(); r == nil || s != observations {
		t.Fatalf("got stream %d, want the observation", s)
	}
	if m.Next[telemetry].Offset != 8 || m.Next[observations].Offset != 1 {
		t.Fatalf("next offsets %+v", m.Next)
	}

	// A stream with more records is waited for as long as it takes: the
	// consumer's positions are exact (transaction markers kept), so there
	// is nothing to guess.
	m.Push(records, []*kgo.Record{{Offset: 0, Timestamp: base}}, 0)
	m.More[telemetry] = true
	for range 100 {
		if r, _ := m.Pop(); r != nil {
			t.Fatal("gave up on a stream with more records")
		}
	}
	m.Push(telemetry, nil, 0) // its fetch reached the end: only markers were left
	if r, s := m.Pop(); r == nil || s != records {
		t.Fatalf("got stream %d after telemetry was read to its end", s)
	}
}

// TestUncommitted: a commit covers the streams applied past their last
// commit, and recording it leaves nothing to commit.
func TestUncommitted(t *testing.T) {
	topics := []string{"a", "b"}
	parts := map[int32]*Merge{}
	for p := range int32(2) {
		m := NewMerge(2)
		m.Push(0, []*kgo.Record{{Offset: 4, LeaderEpoch: 1}}, 0)
		m.Committed[1] = 7
		parts[p] = &m
	}
	parts[1].Pop()
	var offsets map[string]map[int32]kgo.EpochOffset
	for p, m := range parts {
		offsets = m.Uncommitted(p, topics, offsets)
	}
	if len(offsets) != 1 || len(offsets["a"]) != 1 || offsets["a"][1] != (kgo.EpochOffset{Epoch: 1, Offset: 5}) {
		t.Fatalf("offsets %v, want a/1 at 5 only", offsets)
	}
	CommittedAll(offsets, topics, parts, func(m *Merge) *Merge { return m })
	if parts[1].Committed[0] != 5 || parts[1].Committed[1] != 7 {
		t.Fatalf("committed %v, want [5 7]", parts[1].Committed)
	}
	if got := parts[1].Uncommitted(1, topics, nil); got != nil {
		t.Fatalf("uncommitted after the commit: %v", got)
	}
}

// TestLateCounted: a record that arrives after the merge released a later
// one of another stream (the live tail) is applied when it arrives and
// counted as late, once; records in merge order are not.
func TestLateCounted(t *testing.T) {
	m := NewMerge(2)
	parts := map[int32]*Merge{0: &m}
	self := func(m *Merge) *Merge { return m }
	m.Push(0, []*kgo.Record{rec(10, 0), rec(20, 1)}, 0)
	m.Push(1, []*kgo.Record{rec(15, 0)}, 0)
	for r, _ := m.Pop(); r != nil; r, _ = m.Pop() {
	}
	if n := TakeLateAll(parts, self); n != 0 {
		t.Fatalf("%d late records in merge order", n)
	}
	m.Push(1, []*kgo.Record{rec(18, 1), rec(25, 2)}, 0) // 18 arrives after 20 was applied
	var got []int64
	for r, _ := m.Pop(); r != nil; r, _ = m.Pop() {
		got = append(got, r.Timestamp.UnixMilli())
	}
	if !slices.Equal(got, []int64{18, 25}) {
		t.Fatalf("applied %v, want [18 25]", got)
	}
	if n := TakeLateAll(parts, self); n != 1 {
		t.Fatalf("%d late records, want 1", n)
	}
	if n := TakeLateAll(parts, self); n != 0 {
		t.Fatalf("%d late records on the second take, want 0", n)
	}
}
