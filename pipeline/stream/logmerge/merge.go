package logmerge

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Merge is the merge state of the streams of one partition number, as a
// consumer keeps it: the queues and what is known of each stream's end,
// and the positions its commits and checkpoints record. The drift joiner
// and the billing reconciler each keep one per owned partition number.
type Merge struct {
	// Queue, More and Paused are the Streams state (see Streams).
	Queue  [][]*kgo.Record
	More   []bool
	Paused []bool
	// Next is the offset after the last applied record of each stream,
	// with its leader epoch: what a commit records. Offset 0: nothing
	// applied since the partition was assigned.
	Next []kgo.EpochOffset
	// Committed is Next's offset at the last commit (or the restore's
	// target).
	Committed []int64
	// Unfetched is, per stream, how many offsets the last fetch left
	// between its last record and the end of the log: with the queues,
	// the partition's backlog (see Backlog).
	Unfetched []int64
	// Late counts the records Pop returned with a timestamp before one it
	// had returned already (see TakeLateAll); newest is the latest
	// timestamp returned.
	Late   int64
	newest time.Time
	// hold is the live-tail hold (SetHold); none by default.
	hold hold
}

// NewMerge returns the merge state of n streams, nothing queued.
func NewMerge(n int) Merge {
	return Merge{Queue: make([][]*kgo.Record, n), More: make([]bool, n), Paused: make([]bool, n),
		Next: make([]kgo.EpochOffset, n), Committed: make([]int64, n), Unfetched: make([]int64, n)}
}

// Streams returns the merge's view for Pop and Throttle.
func (m *Merge) Streams() Streams { return Streams{Queue: m.Queue, More: m.More, Paused: m.Paused} }

// Push queues records of stream s; unfetched is how many offsets lie
// beyond them (Fetched and ReadTo say so), the stream has more records
// when it is above 0.
func (m *Merge) Push(s int, recs []*kgo.Record, unfetched int64) {
	m.Streams().Push(s, recs, unfetched > 0)
	m.Unfetched[s] = unfetched
	if len(recs) != 0 || unfetched > 0 {
		m.awake(s)
	}
}

// Pop returns the next record in merge order and its stream, advancing
// the stream's Next, or nil and -1 (see Streams.Pop), also while the
// merge holds its releases at the live tail (see SetHold).
func (m *Merge) Pop() (*kgo.Record, int) {
	if m.held() {
		return nil, -1
	}
	r, s := m.Streams().Pop()
	if r != nil {
		if r.Timestamp.Before(m.newest) {
			m.Late++
		} else {
			m.newest = r.Timestamp
		}
		m.Next[s] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
	}
	return r, s
}

// Buffered reports how many records are queued.
func (m *Merge) Buffered() int { return m.Streams().Buffered() }

// Ready reports how many records Pop would return before it has to wait
// (see Streams.Ready), under a hold too (see SetHold).
func (m *Merge) Ready() int {
	if m.hold.d <= 0 {
		return m.Streams().Ready()
	}
	return m.ready()
}

// Backlog is how many records (transaction markers counted) the
// partition has not applied yet, as of the last fetch of each stream:
// those queued and those not fetched. A paused stream's count is as of
// its pause.
func (m *Merge) Backlog() int64 {
	n := int64(m.Buffered())
	for _, u := range m.Unfetched {
		n += u
	}
	return n
}

// BacklogAll returns the sum of the backlogs of parts' merges (merge
// returns a partition's).
func BacklogAll[P any](parts map[int32]P, merge func(P) *Merge) int64 {
	var n int64
	for _, part := range parts {
		n += merge(part).Backlog()
	}
	return n
}

// PushAll pushes the records of fetches (see Fetched) into the merges of
// the partitions in parts (merge returns a partition's), each to the
// stream stream names its topic by; those of partitions not in parts are
// dropped.
func PushAll[P any](fetches kgo.Fetches, parts map[int32]P, merge func(P) *Merge, stream func(topic string) int) {
	Fetched(fetches, func(t string, p int32, recs []*kgo.Record, unfetched int64) {
		if part, ok := parts[p]; ok {
			merge(part).Push(stream(t), recs, unfetched)
		}
	}, nil)
}

// Position returns the merge's position in its partition: the sum over
// its streams of the offset after the last record applied (or committed
// before, after a restore). It grows with every record applied, and two
// members at one position have applied the same records.
func (m *Merge) Position() uint64 {
	var pos uint64
	for s, next := range m.Next {
		pos += uint64(max(next.Offset, m.Committed[s], 0))
	}
	return pos
}

// Uncommitted adds to offsets (made when nil) the position of each stream
// of the merge, partition p, that moved past its last commit: what a
// commit of everything applied records. topics names the streams. It
// returns offsets.
func (m *Merge) Uncommitted(p int32, topics []string, offsets map[string]map[int32]kgo.EpochOffset) map[string]map[int32]kgo.EpochOffset {
	for s, next := range m.Next {
		if next.Offset <= m.Committed[s] {
			continue
		}
		if offsets == nil {
			offsets = map[string]map[int32]kgo.EpochOffset{}
		}
		if offsets[topics[s]] == nil {
			offsets[topics[s]] = map[int32]kgo.EpochOffset{}
		}
		offsets[topics[s]][p] = next
	}
	return offsets
}

// CommittedAll records in the merges of parts (merge returns a
// partition's) that offsets, taken with Uncommitted over topics, are
// committed. Partitions no longer in parts are skipped.
func CommittedAll[P any](offsets map[string]map[int32]kgo.EpochOffset, topics []string, parts map[int32]P, merge func(P) *Merge) {
	for s, t := range topics {
		for p, next := range offsets[t] {
			if part, ok := parts[p]; ok {
				merge(part).Committed[s] = next.Offset
			}
		}
	}
}

// TakeLateAll returns the records that parts' merges (merge returns a
// partition's) released behind the merge order since the last call, and
// starts counting again. Such a record reached the broker after the merge
// had passed its timestamp, at the live tail (see the package comment),
// or its producer's clock is behind the others': a
// restore or replay applies it earlier, so the rows it touched may differ
// from theirs in what depends on the order.
func TakeLateAll[P any](parts map[int32]P, merge func(P) *Merge) int64 {
	var n int64
	for _, part := range parts {
		m := merge(part)
		n += m.Late
		m.Late = 0
	}
	return n
}
