package joiner

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/logmerge"
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

// merge turns the three co-partitioned streams of one partition number
// into one order that depends only on the logs' contents (package
// logmerge): the group consumer, a restore and a fresh replay apply the
// same records in the same order, and the classifier, whose event-time
// watermark and windows depend on that order, writes the same findings.
type merge struct {
	// queue and more are the logmerge state of the three streams.
	queue [numStreams][]*kgo.Record
	more  [numStreams]bool
	// next is the offset after the last applied record of each stream,
	// with its leader epoch: what a commit records. Offset 0: nothing
	// applied since the partition was assigned.
	next [numStreams]kgo.EpochOffset
	// committed is next's offset at the last commit.
	committed [numStreams]int64
	// paused marks the streams whose fetching is paused (Joiner.throttle).
	paused [numStreams]bool
}

func (m *merge) streams() logmerge.Streams {
	return logmerge.Streams{Queue: m.queue[:], More: m.more[:], Paused: m.paused[:]}
}

// push queues records of stream s; more says the stream has records
// beyond them.
func (m *merge) push(s int, recs []*kgo.Record, more bool) { m.streams().Push(s, recs, more) }

// pop returns the next record in merge order and its stream, or nil when
// the queues are empty or the merge must wait for a stream (see
// logmerge.Streams.Pop).
func (m *merge) pop() (*kgo.Record, int) {
	r, s := m.streams().Pop()
	if r != nil {
		m.next[s] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
	}
	return r, s
}

// buffered reports how many records are queued.
func (m *merge) buffered() int { return len(m.queue[0]) + len(m.queue[1]) + len(m.queue[2]) }
