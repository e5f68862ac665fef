package contract

import (
	"testing"
	"time"

	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/internal/cputime"
)

// BenchmarkDecodeEvent measures the shared validator on a typical
// observation line, the hot path of the gateway and of every consumer.
func BenchmarkDecodeEvent(b *testing.B) { benchDecodeEvent(b, false) }

func BenchmarkDecodeEventZeroCopy(b *testing.B) { benchDecodeEvent(b, true) }

func benchDecodeEvent(b *testing.B, zeroCopy bool) {
	line := []byte(validObs)
	v := Validator{Environment: EnvLocalParity, ZeroCopy: zeroCopy}
	measure(b, line, func() {
		for b.Loop() {
			if _, _, err := v.DecodeEvent(line); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// measure runs loop, the benchmark's b.Loop over line, and reports bytes,
// allocations and CPU time per operation.
func measure(b *testing.B, line []byte, loop func()) {
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	cpu := cputime.Now()
	loop()
	if cpu > 0 {
		b.ReportMetric(float64(cputime.Now()-cpu)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkDecode compares, per event type, the reference decoder with the
// single-pass decoder in each of its modes, on events as the Go producers
// write them (see bench/decode/README.md).
func BenchmarkDecode(b *testing.B) {
	modes := []struct {
		name   string
		decode func(v Validator) func([]byte) (Envelope, any, *ValidationError)
		zero   bool
	}{
		{"reference", func(v Validator) func([]byte) (Envelope, any, *ValidationError) { return v.decodeEventRef }, false},
		{"reference-zerocopy", func(v Validator) func([]byte) (Envelope, any, *ValidationError) { return v.decodeEventRef }, true},
		{"validator", func(v Validator) func([]byte) (Envelope, any, *ValidationError) { return v.DecodeEvent }, false},
		{"validator-zerocopy", func(v Validator) func([]byte) (Envelope, any, *ValidationError) { return v.DecodeEvent }, true},
		{"decoder", func(v Validator) func([]byte) (Envelope, any, *ValidationError) { return NewDecoder(v).DecodeEvent }, false},
		{"decoder-zerocopy", func(v Validator) func([]byte) (Envelope, any, *ValidationError) { return NewDecoder(v).DecodeEvent }, true},
	}
	for _, typ := range AllTypes {
		line := sampleEvent(typ, 0)
		b.Run(typ+"/segmentio-unvalidated", func(b *testing.B) {
			parse := unvalidated[typ]()
			measure(b, line, func() {
				for b.Loop() {
					if err := parse(line); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		for _, m := range modes {
			b.Run(typ+"/"+m.name, func(b *testing.B) {
				decode := m.decode(Validator{Environment: EnvLocalParity, ZeroCopy: m.zero})
				measure(b, line, func() {
					for b.Loop() {
						if _, _, err := decode(line); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		}
	}
}

// plainEnvelope is the envelope with a typed payload, for a yardstick:
// segmentio/encoding decoding a line into it, zero-copy, with none of the
// validator's checks (no Scan, no rules).
type plainEnvelope[T any] struct {
	EventID       string    `json:"event_id"`
	EventType     string    `json:"event_type"`
	SchemaVersion int       `json:"schema_version"`
	Producer      string    `json:"producer"`
	Seq           uint64    `json:"seq"`
	OccurredAt    time.Time `json:"occurred_at"`
	CorrelationID string    `json:"correlation_id"`
	Environment   string    `json:"environment"`
	Payload       T         `json:"payload"`
}

func unvalidatedOf[T any]() func([]byte) error {
	var e plainEnvelope[T]
	return func(line []byte) error {
		_, err := json.Parse(line, &e, json.ZeroCopy)
		return err
	}
}

// unvalidated holds, per event type of AllTypes, the yardstick's decoder.
var unvalidated = map[string]func() func([]byte) error{
	TypePlatformRecord:      unvalidatedOf[PlatformRecord],
	TypeProviderObservation: unvalidatedOf[Observation],
	TypeScanCompleted:       unvalidatedOf[ScanCompleted],
	TypeHeartbeat:           unvalidatedOf[Heartbeat],
	TypeUsageRecorded:       unvalidatedOf[Usage],
	TypeBillingRated:        unvalidatedOf[Rated],
	TypeLedgerEntry:         unvalidatedOf[LedgerEntry],
	TypeArtifact:            unvalidatedOf[Artifact],
	TypePolicyBundle:        unvalidatedOf[PolicyBundle],
}

// BenchmarkDecodeDigest compares, per event type, the joiner's decode and
// content digest done in two passes (Decoder.DecodeEvent, then
// EventDigest over the payload again) with the digest computed in the
// decoder's pass (Decoder.DecodeEventDigest), zero-copy as in the joiner.
func BenchmarkDecodeDigest(b *testing.B) {
	for _, typ := range AllTypes {
		line := sampleEvent(typ, 0)
		dec := NewDecoder(Validator{Environment: EnvLocalParity, ZeroCopy: true})
		b.Run(typ+"/two-passes", func(b *testing.B) {
			measure(b, line, func() {
				for b.Loop() {
					env, _, err := dec.DecodeEvent(line)
					if err != nil {
						b.Fatal(err)
					}
					digestSink = EventDigest(&env)
				}
			})
		})
		b.Run(typ+"/one-pass", func(b *testing.B) {
			measure(b, line, func() {
				for b.Loop() {
					_, _, d, err := dec.DecodeEventDigest(line)
					if err != nil {
						b.Fatal(err)
					}
					digestSink = d
				}
			})
		})
	}
}

// digestSink keeps the benchmarks' digests from being optimised away.
var digestSink Digest
