package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/pipeline/contract"
)

// produced counts what the harness wrote to the broker.
type produced struct {
	Lines     int              `json:"lines"`       // generated events (redeliveries included)
	Records   int64            `json:"records"`     // Kafka records (scan markers fanned out to every partition)
	ByTopic   map[string]int64 `json:"by_topic"`    // records per topic
	Bytes     int64            `json:"bytes"`       // record values
	Seconds   float64          `json:"seconds"`     // generate + produce, until every record is acknowledged
	GenSecond float64          `json:"gen_seconds"` // generating alone (a separate pass without producing)
}

// produceFleet generates g's stream and writes it straight to the broker,
// as the ingest gateway would after validation: each event to its
// contract topic, keyed by its identity, on the partition murmur2 gives the
// key (Kafka's default partitioner), scan markers and registry events
// (contract.Broadcast) to every partition, and
// the gateway's headers. Redeliveries are written too (the gateway would
// drop most of them; the joiner's own dedupe then skips them).
func produceFleet(ctx context.Context, brokers string, names contract.Topics, partitions int32, g *fleet.Generator) (produced, error) {
	out := produced{ByTopic: map[string]int64{}}

	// Generation speed alone, so the produce stage is not charged with it.
	start := time.Now()
	if err := g.Emit(func(*fleet.Event) error { return nil }); err != nil {
		return out, err
	}
	out.GenSecond = time.Since(start).Seconds()

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(200_000),
		kgo.ProducerLinger(5*time.Millisecond),
	)
	if err != nil {
		return out, err
	}
	defer cl.Close()
	headers := []kgo.RecordHeader{
		{Key: contract.HeaderActorID, Value: []byte("SYSTEM::bench-harness")},
		{Key: contract.HeaderSourceType, Value: []byte(contract.SourceSystem)},
		{Key: contract.HeaderPolicyRev, Value: []byte("bench")},
	}
	var failed atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
		}
	}
	// Values are copied into slabs: the generator reuses its buffers.
	var slab []byte
	copyBytes := func(b []byte) []byte {
		if len(slab) < len(b) {
			slab = make([]byte, max(1<<20, len(b)))
		}
		c := slab[:len(b):len(b)]
		copy(c, b)
		slab = slab[len(b):]
		return c
	}
	start = time.Now()
	err = g.Emit(func(ev *fleet.Event) error {
		if p := failed.Load(); p != nil {
			return *p
		}
		topic := names.ForType(ev.Type)
		if topic == "" {
			return fmt.Errorf("no topic for event type %q", ev.Type)
		}
		out.Lines++
		key, value := copyBytes(ev.Key), copyBytes(ev.Line)
		out.Bytes += int64(len(value))
		if contract.Broadcast(ev.Type) { // scan markers and registry events: every partition
			for p := range partitions {
				cl.Produce(ctx, &kgo.Record{Topic: topic, Key: key, Value: value, Headers: headers, Partition: p}, promise)
				out.ByTopic[topic]++
				out.Records++
			}
			return nil
		}
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: key, Value: value, Headers: headers, Partition: contract.Partition(key, partitions)}, promise)
		out.ByTopic[topic]++
		out.Records++
		return ctx.Err()
	})
	if ferr := cl.Flush(ctx); err == nil {
		err = ferr
	}
	if p := failed.Load(); p != nil && err == nil {
		err = *p
	}
	out.Seconds = time.Since(start).Seconds()
	if err != nil {
		return out, fmt.Errorf("produce: %w", err)
	}
	return out, nil
}
