package ingest

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/stream"
)

// Defaults of Options.
const (
	DefaultMaxBodyBytes        = 16 << 20
	DefaultMaxInflight         = 64
	DefaultMaxInflightBytes    = 256 << 20
	DefaultMaxLines            = 50_000
	DefaultProduceTimeout      = 10 * time.Second
	DefaultLinger              = 5 * time.Millisecond
	DefaultMaxBufferedRecords  = 100_000
	DefaultDedupeCapacity      = 200_000
	DefaultQuarantineLineLimit = contract.DefaultQuarantineLineLimit
	DefaultRetryAfter          = 5 * time.Second
	DefaultPartitionCacheTTL   = 30 * time.Second
	// DefaultMaxClockSkew is how far ahead of the gateway's clock an
	// event's occurred_at may be (docs/event-time.md).
	DefaultMaxClockSkew = 5 * time.Minute
	// DefaultKeysReloadInterval is how often a command running WatchKeys
	// checks the keys file for changes.
	DefaultKeysReloadInterval = 5 * time.Second
)

// DefaultOptions returns Options with every default written out, for a
// command's flags to start from; the caller sets Environment, Brokers and
// Keys.
func DefaultOptions() Options {
	return Options{
		Topics:              contract.DefaultTopics(),
		MaxBodyBytes:        DefaultMaxBodyBytes,
		MaxInflight:         DefaultMaxInflight,
		MaxInflightBytes:    DefaultMaxInflightBytes,
		MaxLines:            DefaultMaxLines,
		ProduceTimeout:      DefaultProduceTimeout,
		Linger:              DefaultLinger,
		MaxBufferedRecords:  DefaultMaxBufferedRecords,
		DedupeCapacity:      DefaultDedupeCapacity,
		QuarantineLineLimit: DefaultQuarantineLineLimit,
		RetryAfter:          DefaultRetryAfter,
		PartitionCacheTTL:   DefaultPartitionCacheTTL,
		MaxClockSkew:        DefaultMaxClockSkew,
	}
}

// Options configure a Gateway. Zero fields take the documented default.
type Options struct {
	// Environment is the pipeline's environment profile (local_parity, dev,
	// prod); events naming another are rejected. Required.
	Environment string

	// Brokers are the Kafka seed brokers. Required.
	Brokers []string

	// Topics names the topics. Default: contract.DefaultTopics().
	Topics contract.Topics

	// Keys is the API key and client identity allowlist. Required; see
	// keys.OpenKeyring. Gateway.SetKeys replaces it at run time.
	Keys *keys.Keyring

	// ClientCertAuth authenticates callers by their TLS client certificate
	// (mapped to an actor by the keys file's "clients") instead of API
	// keys. Serve then requires a TLS config that requires and verifies
	// client certificates (service.ServerTLSConfig). Required in prod; the
	// preferred mode of dev. Default false (API keys).
	ClientCertAuth bool

	// MaxBodyBytes bounds one request body; a larger body answers 413 and
	// nothing of it is written. Default DefaultMaxBodyBytes (16 MiB). The
	// gateway holds up to MaxInflight bodies in memory at once.
	MaxBodyBytes int64

	// MaxInflight bounds requests processed at once; beyond it the gateway
	// answers 503 with Retry-After instead of queueing without bound.
	// Default DefaultMaxInflight.
	MaxInflight int

	// MaxInflightBytes bounds the request bodies held at once: a request
	// reserves its Content-Length (MaxBodyBytes when unknown) at admission
	// and answers 503 busy when the reservation does not fit. With
	// MaxLines it bounds the gateway's memory whatever callers send.
	// Default DefaultMaxInflightBytes.
	MaxInflightBytes int64

	// MaxLines bounds the lines (newlines) of one request; more answers
	// 413. It caps the per-line bookkeeping a body of tiny lines could
	// cost. Default DefaultMaxLines.
	MaxLines int

	// ProduceTimeout bounds how long a request waits for the broker to
	// acknowledge its records before answering 503. Default
	// DefaultProduceTimeout. Keep the HTTP server's write timeout above it.
	ProduceTimeout time.Duration

	// Linger is how long the producer waits to fill a batch. Small values
	// favour request latency, larger ones broker efficiency. Default
	// DefaultLinger.
	Linger time.Duration

	// MaxBufferedRecords bounds records buffered in the producer; when it is
	// full, requests wait (up to ProduceTimeout) rather than grow memory.
	// Default DefaultMaxBufferedRecords.
	MaxBufferedRecords int

	// DedupeCapacity is how many recently accepted dedupe identities the
	// gateway remembers to answer "duplicate" to retried requests. Default
	// DefaultDedupeCapacity (roughly 30-60 MB at most).
	DedupeCapacity int

	// QuarantineLineLimit bounds the bytes of a rejected line copied into
	// its quarantine record. Default DefaultQuarantineLineLimit.
	QuarantineLineLimit int

	// RetryAfter is advertised on 503 answers. Default DefaultRetryAfter.
	RetryAfter time.Duration

	// PartitionCacheTTL is how long the partition count of a topic is
	// trusted when fanning scan markers out. Default
	// DefaultPartitionCacheTTL.
	PartitionCacheTTL time.Duration

	// MaxClockSkew is how far ahead of the gateway's clock an event's
	// occurred_at may be: a later one is rejected with reason clock_skew
	// and quarantined, since one event from a producer whose clock is
	// wrong would move the joiner's event time with it. Larger admits
	// producers with worse clocks; smaller rejects events of producers
	// whose clocks run slightly ahead. Default DefaultMaxClockSkew.
	MaxClockSkew time.Duration

	// Registry receives the gateway's metrics and is served on /metrics.
	// Default: a new registry with the Go and process collectors.
	Registry *prometheus.Registry

	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger

	// KafkaOpts are extra client options (TLS, SASL, client id), applied
	// after the gateway's own. They must not replace the partitioner or
	// disable idempotence or acks=all.
	KafkaOpts []kgo.Opt

	// now returns the current time; tests replace it.
	now func() time.Time
}

func (o *Options) validate() error {
	if !contract.ValidEnvironment(o.Environment) {
		return fmt.Errorf("environment %q: must be local_parity, dev or prod", o.Environment)
	}
	if len(o.Brokers) == 0 {
		return errors.New("no seed brokers")
	}
	if o.Environment == contract.EnvProd && !o.ClientCertAuth {
		return ErrProdWithoutMTLS
	}
	if err := checkKeys(o.Environment, o.ClientCertAuth, o.Keys); err != nil {
		return err
	}
	if o.Topics == (contract.Topics{}) {
		o.Topics = contract.DefaultTopics()
	}
	for _, t := range o.Topics.All() {
		if t == "" {
			return errors.New("a topic name is empty")
		}
	}
	stream.DefaultPositive(&o.MaxBodyBytes, DefaultMaxBodyBytes)
	stream.DefaultPositive(&o.MaxInflight, DefaultMaxInflight)
	stream.DefaultPositive(&o.MaxInflightBytes, DefaultMaxInflightBytes)
	stream.DefaultPositive(&o.MaxLines, DefaultMaxLines)
	if o.MaxInflightBytes < o.MaxBodyBytes {
		return fmt.Errorf("MaxInflightBytes %d is below MaxBodyBytes %d: a largest request could never be admitted", o.MaxInflightBytes, o.MaxBodyBytes)
	}
	stream.DefaultPositive(&o.ProduceTimeout, DefaultProduceTimeout)
	stream.DefaultPositive(&o.Linger, DefaultLinger)
	stream.DefaultPositive(&o.MaxBufferedRecords, DefaultMaxBufferedRecords)
	stream.DefaultPositive(&o.DedupeCapacity, DefaultDedupeCapacity)
	stream.DefaultPositive(&o.QuarantineLineLimit, DefaultQuarantineLineLimit)
	stream.DefaultPositive(&o.RetryAfter, DefaultRetryAfter)
	stream.DefaultPositive(&o.PartitionCacheTTL, DefaultPartitionCacheTTL)
	stream.DefaultPositive(&o.MaxClockSkew, DefaultMaxClockSkew)
	if o.Registry == nil {
		o.Registry = service.NewRegistry()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.now == nil {
		o.now = time.Now
	}
	return nil
}
