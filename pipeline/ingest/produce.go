package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/event"
)

// ackGrace is how long past ProduceTimeout a request still waits for
// acknowledgements. The producer fails unsent records at ProduceTimeout,
// but a request already on the wire is only failed once the broker answers
// or the connection dies; past this grace the request answers 503 and the
// late acknowledgements are ignored (the records may still land: that is
// the at-least-once case consumers dedupe).
const ackGrace = 2 * time.Second

// errAckTimeout is returned when acknowledgements did not arrive in time.
var errAckTimeout = errors.New("no acknowledgement from the broker in time")

// produce writes every record of b in line order and waits for all
// acknowledgements. It returns an error if any record was not acknowledged;
// lines fully acknowledged before the failure are remembered as accepted so
// a retry answers them duplicate.
func (g *Gateway) produce(reqCtx context.Context, b *batch) error {
	// A client that goes away does not cancel the write: cancelling would
	// fail other requests' records batched with ours. The budget does.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), g.opts.ProduceTimeout)
	defer cancel()

	type owned struct {
		rec  *kgo.Record
		line int
	}
	var recs []owned
	for i := range b.lines {
		l := &b.lines[i]
		if l.receipt.Status == StatusDuplicate {
			continue
		}
		var reason event.Reason
		if l.rejected {
			reason = l.receipt.Reason
		}
		headers := g.headers(b.pol, b.principal, reason)
		if !l.fanout {
			recs = append(recs, owned{&kgo.Record{Topic: l.topic, Key: l.key, Value: l.value, Headers: headers}, i})
			continue
		}
		n, err := g.partitions(ctx, l.topic)
		if err != nil {
			// Nothing has been produced yet: fail the request whole.
			g.m.produceErrors.WithLabelValues(l.topic).Inc()
			return fmt.Errorf("partition count of %s for scan marker fan-out: %w", l.topic, err)
		}
		fctx := withFanout(ctx)
		for p := range n {
			recs = append(recs, owned{&kgo.Record{Topic: l.topic, Key: l.key, Value: l.value, Headers: headers, Partition: p, Context: fctx}, i})
		}
	}
	if len(recs) == 0 {
		return nil
	}

	errs := make([]error, len(recs)) // errs[i] is written once, by record i's promise
	var wg sync.WaitGroup
	wg.Add(len(recs))
	for i, o := range recs {
		// Produce blocks while the producer buffer is full (bounded by
		// ctx): that is the backpressure onto this request.
		g.cl.Produce(ctx, o.rec, func(_ *kgo.Record, err error) {
			errs[i] = err
			wg.Done()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	hard := time.NewTimer(g.opts.ProduceTimeout + ackGrace)
	defer hard.Stop()
	select {
	case <-done:
	case <-hard.C:
		return errAckTimeout
	}

	failed := make([]bool, len(b.lines))
	var first error
	for i, err := range errs {
		if err == nil {
			continue
		}
		g.m.produceErrors.WithLabelValues(recs[i].rec.Topic).Inc()
		failed[recs[i].line] = true
		if first == nil {
			first = fmt.Errorf("produce to %s: %w", recs[i].rec.Topic, err)
		}
	}
	if first == nil {
		return nil
	}
	var durable []string
	for i := range b.lines {
		if l := &b.lines[i]; l.receipt.Status == StatusAccepted && !failed[i] {
			durable = append(durable, l.dedupeID)
		}
	}
	g.recent.add(durable...)
	return first
}
