package joiner

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Streams of a partition number, in the order that breaks timestamp ties
// in the merge: desired state first, then what providers saw, then what
// node agents reported.
const (
	streamRecords = iota
	streamObservations
	streamTelemetry
	numStreams
)

// stuckAfter is how long the merge waits for a stream that the broker
// said has more records before it takes the stream as caught up. It only
// matters when the last offsets below the high watermark carry no records
// (transaction markers), which the joined topics do not normally have.
const stuckAfter = 5 * time.Second

// merge turns the three co-partitioned streams of one partition number
// into one order that depends only on the logs' contents: the next record
// is always the head, among the streams, with the earliest Kafka
// timestamp (the time the gateway produced it; ties go to records, then
// observations, then telemetry), and the merge waits while a stream that
// has more records below its end has none buffered. The group consumer
// (in whatever chunks the fetches bring), a restore and a fresh replay
// therefore apply the same records in the same order, and the classifier,
// whose event-time watermark and windows depend on that order, writes the
// same findings. The one exception is the live tail: a stream that is
// caught up cannot say that a record with an earlier timestamp is still
// in flight to the broker; such a record is applied when it arrives.
type merge struct {
	// queue holds the polled, not yet applied records of each stream,
	// in offset order.
	queue [numStreams][]*kgo.Record
	// more says the stream has records beyond those queued (below the
	// fetch's last stable offset, or below the restore's target).
	more [numStreams]bool
	// waitingSince is when the merge started to wait for the stream.
	waitingSince [numStreams]time.Time
	// next is the offset after the last applied record of each stream,
	// with its leader epoch: what a commit records. Offset 0: nothing
	// applied since the partition was assigned.
	next [numStreams]kgo.EpochOffset
	// committed is next's offset at the last commit.
	committed [numStreams]int64
}

// push queues records of stream s; more says the stream has records
// beyond them.
func (m *merge) push(s int, recs []*kgo.Record, more bool) {
	m.queue[s] = append(m.queue[s], recs...)
	m.more[s] = more
	if len(recs) > 0 {
		m.waitingSince[s] = time.Time{}
	}
}

// pop returns the next record in merge order and its stream, or nil when
// the queues are empty or the merge must wait for a stream. now is only
// used to give up on a stream that stays silent (see stuckAfter); a zero
// now never gives up.
func (m *merge) pop(now time.Time) (*kgo.Record, int) {
	best := -1
	for s := range numStreams {
		if len(m.queue[s]) == 0 {
			if m.more[s] {
				if now.IsZero() {
					return nil, -1
				}
				if m.waitingSince[s].IsZero() {
					m.waitingSince[s] = now
				}
				if now.Sub(m.waitingSince[s]) < stuckAfter {
					return nil, -1
				}
				m.more[s] = false
			}
			continue
		}
		if best < 0 || m.queue[s][0].Timestamp.Before(m.queue[best][0].Timestamp) {
			best = s // equal timestamps: the lower stream, found first, wins
		}
	}
	if best < 0 {
		return nil, -1
	}
	r := m.queue[best][0]
	m.queue[best][0] = nil
	m.queue[best] = m.queue[best][1:]
	m.next[best] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
	return r, best
}

// buffered reports how many records are queued.
func (m *merge) buffered() int {
	return len(m.queue[0]) + len(m.queue[1]) + len(m.queue[2])
}
