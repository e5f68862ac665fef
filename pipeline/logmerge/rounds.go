package logmerge

import "time"

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
type Rounds struct {
	// Interval and Records bound a round while the consumer keeps up.
	Interval time.Duration
	Records  int
	// CatchUpInterval and CatchUpRecords bound a round while the backlog
	// is larger than Records. A CatchUpInterval not above Interval turns
	// catching up off.
	CatchUpInterval time.Duration
	CatchUpRecords  int
}

// Limits returns how long a round may run and how many records it may
// apply, given the backlog (the records not applied yet; see
// Merge.Backlog) as of its last poll.
func (r Rounds) Limits(backlog int64) (time.Duration, int) {
	if r.CatchingUp(backlog) {
		return r.CatchUpInterval, max(r.Records, r.CatchUpRecords)
	}
	return r.Interval, r.Records
}

// CatchingUp reports whether a consumer with backlog records not applied
// yet runs catch-up rounds.
func (r Rounds) CatchingUp(backlog int64) bool {
	return r.CatchUpInterval > r.Interval && backlog > int64(r.Records)
}
