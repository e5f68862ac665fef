package billing

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/logmerge"
)

// Streams of a partition number, in the order that breaks timestamp ties
// in the merge: usage first, then rated lines, then postings (the order in
// which they normally happen).
const (
	streamUsage = iota
	streamRated
	streamLedger
	numStreams
)

// merge orders the three co-partitioned billing streams of one partition
// number by package logmerge, so that the live consumer, a restore and a
// fresh replay apply the same records in the same order: the tracker's
// watermark, graces and window versions depend on that order, so the rows
// written do not depend on how fetches chunk the logs, nor on crashes and
// restarts.
type merge struct {
	queue [numStreams][]*kgo.Record
	more  [numStreams]bool
	// next is the offset after the last applied record of each stream,
	// with its leader epoch: what a commit records. Offset 0: nothing
	// applied since the partition was assigned.
	next [numStreams]kgo.EpochOffset
	// committed is next's offset at the last commit.
	committed [numStreams]int64
	// paused marks the streams whose fetching is paused (throttle).
	paused [numStreams]bool
}

func (m *merge) streams() logmerge.Streams {
	return logmerge.Streams{Queue: m.queue[:], More: m.more[:], Paused: m.paused[:]}
}

// push queues records of stream s; more says the stream has records
// beyond them.
func (m *merge) push(s int, recs []*kgo.Record, more bool) { m.streams().Push(s, recs, more) }

// pop returns the next record in merge order, or nil when the queues are
// empty or the merge must wait for a stream (see logmerge.Streams.Pop).
func (m *merge) pop() *kgo.Record {
	r, s := m.streams().Pop()
	if r != nil {
		m.next[s] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
	}
	return r
}

func (m *merge) buffered() int { return m.streams().Buffered() }

// stream returns the stream index of topic t.
func (r *Reconciler) stream(t string) int {
	switch t {
	case r.opts.Topics.Rated:
		return streamRated
	case r.opts.Topics.Ledger:
		return streamLedger
	}
	return streamUsage
}

// streamTopics returns the topic of each stream.
func (r *Reconciler) streamTopics() [numStreams]string {
	return [numStreams]string{r.opts.Topics.Usage, r.opts.Topics.Rated, r.opts.Topics.Ledger}
}
