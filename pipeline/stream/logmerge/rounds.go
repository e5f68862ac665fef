package logmerge

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Rounds sizes a consumer's rounds. A round polls and applies records
// until its time or its record count is up; then what it produced is
// written to ClickHouse and its offsets are committed.
//
// While the consumer keeps up, a round is short (Interval), so what it
// finds is written soon. While it is behind (a restart after downtime, a
// new consumer group reading the topics from the start), a round may run
// to CatchUpInterval: every write to ClickHouse creates a part per table
// and costs the server a fixed amount of work, merges included, however
// few its rows, so fewer, larger writes leave more of the machine for
// catching up. Findings then appear up to CatchUpInterval later, while
// they are late by the backlog anyway; once the backlog is down to one
// regular round, rounds are short again.
//
// A catch-up round takes at most half the backlog it starts with, so the
// last rounds of a catch-up shrink: a round's write overlaps the next
// round's work, and the consumer is caught up (its offsets committed)
// only once the last write is done. Ending on a full-size round would
// leave that write, the largest, with nothing to overlap.
//
// A round that starts behind by a quarter of a regular round or more
// ends as soon as it has caught up (no backlog left) instead of waiting
// out its interval: the findings of a catch-up's last records are written
// then, not an interval later. While the consumer keeps up, a round
// starts with what arrived during the last seal, far less, and rounds
// keep their interval.
type Rounds struct {
	// Interval and Records bound a round while the consumer keeps up.
	Interval time.Duration
	Records  int
	// CatchUpInterval and CatchUpRecords bound a round while the backlog
	// is larger than Records. A CatchUpInterval not above Interval turns
	// catching up off.
	CatchUpInterval time.Duration
	CatchUpRecords  int
	// Pending, when set, reports that the consumer's last apply left
	// work that waits for the round's write and needs no new records (a
	// processor that bounds what a round holds): the round ends after
	// that apply, and the next one's first poll takes only what the
	// client has buffered, without waiting. It is called without any
	// lock of the consumer's.
	Pending func() bool
}

// Limits returns how long a round may run and how many records it may
// apply, given the backlog (the records not applied yet; see
// Merge.Backlog) as of its start.
func (r Rounds) Limits(backlog int64) (time.Duration, int) {
	if r.CatchUpInterval > r.Interval && backlog > int64(r.Records) {
		return r.CatchUpInterval, max(r.Records, int(min(int64(r.CatchUpRecords), backlog/2)))
	}
	return r.Interval, r.Records
}

// drains reports whether a round that starts with backlog ends once it
// has caught up.
func (r Rounds) drains(backlog int64) bool { return backlog > 0 && backlog >= int64(r.Records)/4 }

// Round runs one round of a consumer's poll loop on cl: it polls and
// hands each poll's fetches to apply, which returns how many records it
// applied and the backlog after them, until the round's limits (given the
// backlog) are reached, it has caught up after starting behind (see
// Rounds), or ctx ends. backlog is the one the previous round ended
// with. It returns whether the round ran past the regular limits and the
// backlog it ended with; closed reports that cl was closed (the fetches
// of that poll are not applied).
func (r Rounds) Round(ctx context.Context, cl *kgo.Client, backlog int64,
	apply func(kgo.Fetches) (applied int, backlog int64)) (catchUp bool, after int64, closed bool) {
	start, processed := time.Now(), 0
	drain := r.drains(backlog)
	for {
		// The backlog at the start: the one known now (the first poll of
		// a consumer's first round finds it out) with what the round
		// applied.
		limit, most := r.Limits(backlog + int64(processed))
		deadline, now := start.Add(limit), time.Now()
		if processed >= most || !now.Before(deadline) {
			break
		}
		if processed >= r.Records || !now.Before(start.Add(r.Interval)) {
			catchUp = true // a regular round would have ended here
		}
		// Whole fetches only: a poll that took part of one (PollRecords
		// with a count) would leave the rest, records of other streams,
		// in the client, while a merge knows a stream's end only from its
		// last fetch and would release records of the streams polled
		// ahead of them. A round may therefore end up to one fetch past
		// its record count.
		if r.Pending != nil && r.Pending() {
			deadline = now // what is buffered, at once
		}
		pctx, cancel := context.WithDeadline(ctx, deadline)
		fetches := cl.PollFetches(pctx)
		cancel()
		if fetches.IsClientClosed() {
			return false, backlog, true
		}
		n, b := apply(fetches)
		processed, backlog = processed+n, b
		if ctx.Err() != nil || drain && backlog == 0 && processed > 0 || r.Pending != nil && r.Pending() {
			break
		}
	}
	return catchUp, backlog, false
}
