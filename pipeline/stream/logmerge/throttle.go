package logmerge

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FetchMaxWait is how long a consumer that throttles lets the broker hold
// a fetch that has nothing new (kgo.FetchMaxWait). A resumed stream is
// fetched by the next fetch request only, once the one in flight returns,
// and at the end of the other streams' logs the broker holds that one for
// its whole max wait: with kgo's default of 5 s, the last records of a
// catch-up waited as long (the last 145,000 of 6.1M records for 4.4 s in
// a 10M benchmark run). An idle consumer sends a fetch per broker every
// FetchMaxWait instead of every 5 s.
const FetchMaxWait = 250 * time.Millisecond

// Throttle bounds the records a consumer's merges hold. The merge releases
// records in timestamp order, so a stream ahead of the others (provider
// observations while the platform records that precede them are still
// being read, say) cannot be applied and would otherwise pile up in its
// queue: memory grows with the backlog, and every fetch spends most of its
// bytes on that stream instead of on the one the merge waits for. A
// stream whose queue reaches High records is therefore paused (the client
// stops fetching it and drops what it had buffered for it, to fetch it
// again on resume) until the merge has drained it below Low.
//
// A paused stream is never the one a merge waits for: it is resumed before
// its queue runs empty (Low > 0, and Check runs after every apply), so
// pausing changes when records are fetched, never their order.
type Throttle struct {
	// High is the queue length at which a stream is paused; Low, at most
	// High and above 0, the length below which it is resumed.
	High, Low int

	pause, resume map[string][]int32
}

// NewThrottle returns a Throttle pausing at high records and resuming
// below a quarter of that: a partition's fetch brings a few thousand
// records of a stream, so a default high keeps about one fetch in hand
// while the stream is fetched again.
func NewThrottle(high int) Throttle { return Throttle{High: high, Low: max(1, high/4)} }

// Check updates the paused streams of partition p, whose streams are
// topics (in stream order), and records what Apply must pause or resume.
func (t *Throttle) Check(m Streams, topics []string, p int32) {
	for s, q := range m.Queue {
		switch n := len(q); {
		case !m.Paused[s] && n >= t.High:
			m.Paused[s] = true
			t.pause = addPartition(t.pause, topics[s], p)
		case m.Paused[s] && n < t.Low:
			m.Paused[s] = false
			t.resume = addPartition(t.resume, topics[s], p)
		}
	}
}

// Apply pauses and resumes on cl what the Checks since the last Apply
// decided, and reports how many streams it paused and resumed.
func (t *Throttle) Apply(cl *kgo.Client) (paused, resumed int) {
	if len(t.pause) != 0 {
		cl.PauseFetchPartitions(t.pause)
		paused = count(t.pause)
		clear(t.pause)
	}
	if len(t.resume) != 0 {
		cl.ResumeFetchPartitions(t.resume)
		resumed = count(t.resume)
		clear(t.resume)
	}
	return paused, resumed
}

// ThrottleAll checks the streams of every partition in parts (streams
// returns a partition's merge view) and applies the decisions on cl. It
// returns how many streams it paused, and how many of parts' streams are
// paused after it.
func ThrottleAll[P any](t *Throttle, cl *kgo.Client, topics []string, parts map[int32]P, streams func(P) Streams) (paused, now int) {
	for p, part := range parts {
		t.Check(streams(part), topics, p)
	}
	paused, _ = t.Apply(cl)
	for _, part := range parts {
		for _, on := range streams(part).Paused {
			if on {
				now++
			}
		}
	}
	return paused, now
}

func addPartition(m map[string][]int32, topic string, p int32) map[string][]int32 {
	if m == nil {
		m = map[string][]int32{}
	}
	m[topic] = append(m[topic], p)
	return m
}

func count(m map[string][]int32) int {
	n := 0
	for _, ps := range m {
		n += len(ps)
	}
	return n
}
