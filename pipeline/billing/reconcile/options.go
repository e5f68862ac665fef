package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream"
)

// Sink is where the reconciler writes mismatches and rated lines.
type Sink interface {
	Write(ctx context.Context, b *Batch) error
}

// Quarantine is where the reconciler sends the well-formed records it
// does not apply (ingest.Quarantiner is one): Produce sends one
// asynchronously, and Flush waits until every one sent is acknowledged
// and returns the first error since the last Flush. The reconciler
// commits the records' offsets only after a Flush that succeeded.
type Quarantine interface {
	Produce(ctx context.Context, rec *kgo.Record, verr *contract.ValidationError)
	Flush(ctx context.Context) error
}

// Options configure a Reconciler. A field left at its zero value takes
// its default (DefaultOptions).
type Options struct {
	// StageOptions are the brokers, topics, environment, logger, metrics
	// and client options. The default Group is "driftline-billing".
	stream.StageOptions
	// RoundOptions size the rounds and the merges. Defaults: flush every
	// 500ms or 50000 events, catch up in rounds of 3s or 50,000 events
	// (the rows of a round wait in memory for its write), queue 2048
	// records a stream (a stream ahead of the others, the rated lines
	// while the usage before them is applied, pauses instead of holding
	// its records).
	stream.RoundOptions
	// Prices is the price book unknown_unit is judged against: the same
	// file the rater loads. Required.
	Prices *pricebook.Store
	// Rules holds the event-time windows. Default DefaultRules(); a zero
	// field of Rules takes its default too, but for AllowedLateness, whose
	// zero is none.
	Rules Rules
	// MaxClockSkew is how far an event's occurred_at may lie ahead of its
	// record's broker timestamp; a later one is rejected (counted with
	// reason clock_skew, never applied), and an accepted one moves the
	// partition's event time no further than its broker timestamp
	// (docs/event-time.md). Default 5m; negative disables the check (not
	// the cap).
	MaxClockSkew time.Duration
	// Quarantine receives the records rejected for clock_skew, with
	// their reason. Default none: they are only counted (per producer on
	// the status endpoint, and by reason in the metrics).
	Quarantine Quarantine
	// GCHeadroom, when positive, lets the reconciler pace the process's
	// collector after each round: GOGC is set so that the heap grows by
	// about this many bytes beyond the live heap between two collections,
	// within 10% and 25% of the live heap (service.GCPacer). For a process that runs
	// the reconciler alone (bin/rater -rater.enabled=false sets 128 MiB
	// unless GOGC is set). Default 0: the collector is left alone.
	GCHeadroom uint64
	// StateMemory, when positive, bounds the bytes of usage states and
	// their strings the reconciler keeps in memory, over all its
	// partitions: the chunks used least recently beyond it go to scratch
	// files in SpillDir and are read back when used (spill.go). What
	// stays in memory beside it grows by about 30 bytes a usage_id held
	// (its two table entries and a pending deadline). Default 64 MiB
	// (DefaultStateMemory); negative keeps all in memory.
	StateMemory int64
	// SpillDir is where the scratch files of StateMemory are created
	// (and at once unlinked, so none is left after a crash). Default the
	// system's temporary directory.
	SpillDir string
}

// DefaultOptions returns the default of every option but Brokers and
// Prices (and those that default to none).
func DefaultOptions() Options {
	return Options{
		StageOptions: stream.DefaultStageOptions("driftline-billing"),
		RoundOptions: stream.DefaultRoundOptions(50_000, 50_000, 2048),
		Rules:        DefaultRules(),
		MaxClockSkew: 5 * time.Minute,
		StateMemory:  DefaultStateMemory,
	}
}

// DefaultStateMemory is the default Options.StateMemory: room for about
// 430,000 usage states of 120 bytes with 35 bytes of strings each, many
// times what a reconciler uses between a usage and its rated line when
// the rater keeps up.
const DefaultStateMemory = 64 << 20

// defaults fills the options left zero from DefaultOptions and checks
// them.
func (o *Options) defaults() error {
	d := DefaultOptions()
	if err := o.StageOptions.Defaults("billing", d.StageOptions); err != nil {
		return err
	}
	if o.Prices == nil {
		return errors.New("billing: no price book")
	}
	o.RoundOptions.Defaults(d.RoundOptions)
	o.Rules.defaults()
	stream.Default(&o.MaxClockSkew, d.MaxClockSkew)
	stream.Default(&o.StateMemory, d.StateMemory)
	return nil
}
