package rater

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/stream"
)

// Options configure a Rater. A field left at its zero value takes its
// default (DefaultOptions).
type Options struct {
	// StageOptions are the brokers, topics, environment (stamped on rated
	// lines; usage for another is quarantined), logger, metrics and
	// client options. The default Group is "driftline-rater".
	stream.StageOptions
	// Prices is the price book in use. Required.
	Prices *pricebook.Store
	// TransactionalID identifies this rater's transactions. It must be
	// stable across restarts of one instance (so a restart fences the
	// crashed incarnation) and distinct between instances running at
	// once. Default "driftline-rater".
	TransactionalID string
	// InstanceID is the static group membership id (group.instance.id).
	// A restarted instance with the same id takes over its partitions at
	// once, instead of waiting for the crashed member's session to time
	// out. Default (left empty by DefaultOptions, since it follows
	// TransactionalID): TransactionalID. Set "-" for dynamic membership.
	InstanceID string
	// DisableTransactions rates at-least-once without transactions, to
	// measure their overhead. Default false (transactions on).
	DisableTransactions bool
	// TransactionTimeout bounds how long a crashed rater's open
	// transaction can hold back read_committed consumers if it is not
	// fenced by a restart. Default 10s.
	TransactionTimeout time.Duration
	// Currencies, when not empty, are the only currencies the rater may
	// bill; usage of a unit priced in another is quarantined
	// (currency_not_allowed). Default: any currency the price book names.
	Currencies []string
	// MaxBatch bounds the records of one transaction. Larger batches
	// amortise the flush and commit, which the loop waits for (bench/rater);
	// smaller ones redo less after a crash and hold less memory (about 600
	// bytes per record of a round).
	// Default 50000.
	MaxBatch int
	// Horizon bounds the memory of usage keys, in event time: a key is
	// remembered until its usage's occurred_at is more than Horizon
	// behind the partition's watermark, and usage that occurred earlier
	// than that is quarantined (late_event), never rated (state.go).
	// Longer remembers more keys (64-93 bytes each, docs/sizing.md)
	// and accepts later redeliveries. Default 48h, the billing
	// reconciler's horizon.
	Horizon time.Duration
	// Compression is the codec of the batches of rated lines and
	// quarantine records: snappy, lz4, zstd, gzip or none. The rater
	// compresses what it produces and the billing reconciler decompresses
	// it; none spends no CPU on either side and sends about six times
	// the bytes (bench/rater). Default snappy, the cheapest codec that
	// compresses.
	Compression string
	// GCHeadroom, when positive, lets the rater pace the process's
	// collector after each transaction: GOGC is set so that the heap grows
	// by about this many bytes beyond the live heap between two
	// collections, within 10% and 25% of the live heap (service.GCPacer).
	// The usage keys hold no pointers, so a collection marks little more
	// than the round's records. For a process that runs the rater alone
	// (bin/rater -billing.enabled=false sets 128 MiB unless GOGC is set).
	// Default 0: the collector is left alone.
	GCHeadroom uint64
	// Now is the clock of rated_at. Default time.Now.
	Now func() time.Time
}

// codecs are the values of Options.Compression.
var codecs = map[string]kgo.CompressionCodec{
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
	"gzip":   kgo.GzipCompression(),
	"none":   kgo.NoCompression(),
}

// codec returns the codec of o.Compression, which defaults checked.
func (o *Options) codec() kgo.CompressionCodec { return codecs[o.Compression] }

// DefaultOptions returns the default of every option but Brokers and
// Prices (and those that default to none).
func DefaultOptions() Options {
	return Options{
		StageOptions:       stream.DefaultStageOptions("driftline-rater"),
		TransactionalID:    "driftline-rater",
		TransactionTimeout: 10 * time.Second,
		MaxBatch:           50000,
		Horizon:            48 * time.Hour,
		Compression:        "snappy",
		Now:                time.Now,
	}
}

// defaults fills the options left zero from DefaultOptions and checks
// them.
func (o *Options) defaults() error {
	d := DefaultOptions()
	if err := o.StageOptions.Defaults("rater", d.StageOptions); err != nil {
		return err
	}
	if o.Prices == nil {
		return errors.New("rater: no price book")
	}
	stream.Default(&o.TransactionalID, d.TransactionalID)
	stream.Default(&o.InstanceID, o.TransactionalID)
	stream.DefaultPositive(&o.TransactionTimeout, d.TransactionTimeout)
	stream.DefaultPositive(&o.MaxBatch, d.MaxBatch)
	stream.DefaultPositive(&o.Horizon, d.Horizon)
	stream.Default(&o.Compression, d.Compression)
	if _, ok := codecs[o.Compression]; !ok {
		return fmt.Errorf("rater: compression %q: want snappy, lz4, zstd, gzip or none", o.Compression)
	}
	if o.Now == nil {
		o.Now = d.Now
	}
	return nil
}
