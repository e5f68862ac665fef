package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/contract"
)

// Sink is where the reconciler writes mismatches and rated lines.
type Sink interface {
	Write(ctx context.Context, b *Batch) error
}

// Options configure a Reconciler. A field left at its zero value takes
// its default (DefaultOptions).
type Options struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Prices is the price book unknown_unit is judged against: the same
	// file the rater loads. Required.
	Prices *pricebook.Store
	// Group is the consumer group all billing reconcilers share. Default
	// "driftline-billing".
	Group string
	// Topics names the topics. Default contract.DefaultTopics().
	Topics contract.Topics
	// Environment is the pipeline's environment; events for another are
	// invalid. Default local_parity.
	Environment string
	// Rules holds the event-time windows. Default DefaultRules(); a zero
	// field of Rules takes its default too, but for AllowedLateness, whose
	// zero is none.
	Rules Rules
	// FlushInterval bounds how long processed events wait before their
	// rows are written and their offsets committed. Default 500ms.
	FlushInterval time.Duration
	// FlushEvents flushes once this many events were processed. Default
	// 50000.
	FlushEvents int
	// CatchUpInterval bounds a round instead of FlushInterval while the
	// reconciler is behind by more than FlushEvents records (see
	// logmerge.Rounds): fewer, larger writes while it catches up.
	// Default 3s; a negative one, or one not above FlushInterval, turns
	// catching up off.
	CatchUpInterval time.Duration
	// CatchUpEvents bounds a catch-up round's events. Default 500,000.
	CatchUpEvents int
	// Logger receives operational logs. Default slog.Default() as of New.
	Logger *slog.Logger
	// Registerer receives the reconciler's metrics. Default none.
	Registerer prometheus.Registerer
	// QueueRecords bounds the records a stream of one partition may hold
	// in its merge while it waits for an earlier stream (usage already
	// fetched while the rater is still producing the rated lines before
	// it): at that many the stream's fetching pauses until the merge has
	// drained it to a quarter (logmerge.Throttle). Default 16384.
	QueueRecords int
	// ClientOpts are extra franz-go options (tests, TLS, SASL). Default
	// none.
	ClientOpts []kgo.Opt
}

// DefaultOptions returns the default of every option but Brokers and
// Prices (and those that default to none).
func DefaultOptions() Options {
	return Options{
		Group:           "driftline-billing",
		Topics:          contract.DefaultTopics(),
		Environment:     contract.EnvLocalParity,
		Rules:           DefaultRules(),
		FlushInterval:   500 * time.Millisecond,
		FlushEvents:     50_000,
		CatchUpInterval: 3 * time.Second,
		CatchUpEvents:   500_000,
		QueueRecords:    16384,
	}
}

// defaults fills the options left zero from DefaultOptions and checks
// them.
func (o *Options) defaults() error {
	if len(o.Brokers) == 0 {
		return errors.New("billing: no brokers")
	}
	if o.Prices == nil {
		return errors.New("billing: no price book")
	}
	d := DefaultOptions()
	if o.Group == "" {
		o.Group = d.Group
	}
	if o.Topics == (contract.Topics{}) {
		o.Topics = d.Topics
	}
	if o.Environment == "" {
		o.Environment = d.Environment
	}
	o.Rules.defaults()
	if o.FlushInterval <= 0 {
		o.FlushInterval = d.FlushInterval
	}
	if o.FlushEvents <= 0 {
		o.FlushEvents = d.FlushEvents
	}
	if o.CatchUpInterval == 0 {
		o.CatchUpInterval = d.CatchUpInterval
	}
	if o.CatchUpEvents <= 0 {
		o.CatchUpEvents = d.CatchUpEvents
	}
	if o.QueueRecords <= 0 {
		o.QueueRecords = d.QueueRecords
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}
