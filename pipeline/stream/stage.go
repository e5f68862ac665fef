package stream

import (
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/logmerge"
)

// StageOptions are the options every stage run on a Member shares (the
// joiner, the billing reconciler, the rater embed them in their Options).
// A field left at its zero value takes the stage's default.
type StageOptions struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Group is the consumer group all members of the stage share.
	// Default: the stage's (its DefaultOptions).
	Group string
	// Topics names the topics. Default contract.DefaultTopics().
	Topics contract.Topics
	// Environment is the pipeline's environment; events for another are
	// invalid. Default local_parity.
	Environment string
	// Logger receives operational logs. Default slog.Default() as of New.
	Logger *slog.Logger
	// Registerer receives the stage's metrics. Default none.
	Registerer prometheus.Registerer
	// ClientOpts are extra franz-go options of every client (tests, TLS,
	// SASL). Default none.
	ClientOpts []kgo.Opt
}

// DefaultStageOptions returns the defaults of a stage whose consumer
// group is group.
func DefaultStageOptions(group string) StageOptions {
	return StageOptions{Group: group, Topics: contract.DefaultTopics(), Environment: contract.EnvLocalParity}
}

// Defaults fills the options left zero from d and checks them; name
// prefixes the errors ("joiner: no brokers").
func (o *StageOptions) Defaults(name string, d StageOptions) error {
	if len(o.Brokers) == 0 {
		return errors.New(name + ": no brokers")
	}
	Default(&o.Group, d.Group)
	Default(&o.Topics, d.Topics)
	Default(&o.Environment, d.Environment)
	Default(&o.Logger, slog.Default())
	return nil
}

// Member returns the options of the stage's Member, named name,
// consuming topics; the caller sets what is particular to the stage.
func (o *StageOptions) Member(name string, topics []string) Options {
	return Options{Name: name, Brokers: o.Brokers, Group: o.Group, Names: o.Topics, Topics: topics,
		Logger: o.Logger, ClientOpts: o.ClientOpts}
}

// RoundOptions size the rounds of a stage that merges its streams
// (logmerge.Rounds) and bound what the merges hold. A field left at its
// zero value takes the stage's default.
type RoundOptions struct {
	// FlushInterval bounds how long processed events wait before their
	// rows are written and their offsets committed.
	FlushInterval time.Duration
	// FlushEvents flushes once this many events were processed.
	FlushEvents int
	// CatchUpInterval bounds a round instead of FlushInterval while the
	// stage is behind by more than FlushEvents records (see
	// logmerge.Rounds): fewer, larger writes while it catches up. A
	// negative one, or one not above FlushInterval, turns catching up off.
	CatchUpInterval time.Duration
	// CatchUpEvents bounds a catch-up round's events.
	CatchUpEvents int
	// QueueRecords bounds the records a stream of one partition may hold
	// in its merge while it waits for an earlier stream: at that many the
	// stream's fetching pauses until the merge has drained it to a
	// quarter (logmerge.Throttle).
	QueueRecords int
	// LiveHold holds a merge's release at the live tail while a stream
	// is caught up and empty (logmerge.Merge.SetHold): up to it more
	// latency on partitions where a stream is idle (once per idle spell
	// of a stream), and a record that a producer timestamped before the
	// records of the other streams but delivered within it (its retries
	// across a broker restart) is applied in timestamp order, as a replay
	// applies it, instead of late. Restores never hold. Default 0: no
	// hold.
	LiveHold time.Duration
}

// DefaultRoundOptions returns the rounds of a stage that flushes after
// flushEvents events and catches up in rounds of catchUpEvents, every
// 500ms (3s while catching up), with up to queueRecords records queued a
// stream.
func DefaultRoundOptions(flushEvents, catchUpEvents, queueRecords int) RoundOptions {
	return RoundOptions{FlushInterval: 500 * time.Millisecond, FlushEvents: flushEvents,
		CatchUpInterval: 3 * time.Second, CatchUpEvents: catchUpEvents, QueueRecords: queueRecords}
}

// Defaults fills the options left zero (or negative, but for
// CatchUpInterval) from d.
func (o *RoundOptions) Defaults(d RoundOptions) {
	DefaultPositive(&o.FlushInterval, d.FlushInterval)
	DefaultPositive(&o.FlushEvents, d.FlushEvents)
	Default(&o.CatchUpInterval, d.CatchUpInterval)
	DefaultPositive(&o.CatchUpEvents, d.CatchUpEvents)
	DefaultPositive(&o.QueueRecords, d.QueueRecords)
}

// Rounds returns the Member's rounds.
func (o *RoundOptions) Rounds() logmerge.Rounds {
	return logmerge.Rounds{Interval: o.FlushInterval, Records: o.FlushEvents,
		CatchUpInterval: o.CatchUpInterval, CatchUpRecords: o.CatchUpEvents}
}
