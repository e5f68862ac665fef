package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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

	recs, lineOf, err := g.records(ctx, b)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex    // mu protects failures
		failures []*kgo.Record // records the broker did not take
		firstErr error
	)
	wg.Add(len(recs))
	promise := func(r *kgo.Record, err error) { // one closure for the whole request
		if err != nil {
			mu.Lock()
			failures = append(failures, r)
			if firstErr == nil {
				firstErr = fmt.Errorf("produce to %s: %w", r.Topic, err)
			}
			mu.Unlock()
		}
		wg.Done()
	}
	for i := range recs {
		// Produce blocks while the producer buffer is full (bounded by
		// ctx): that is the backpressure onto this request.
		g.cl.Produce(ctx, &recs[i], promise)
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
	if len(failures) == 0 {
		return nil
	}

	index := make(map[*kgo.Record]int, len(recs)) // the failure path only
	for i := range recs {
		index[&recs[i]] = i
	}
	failed := make([]bool, len(b.lines))
	for _, r := range failures {
		g.m.produceErrors.WithLabelValues(r.Topic).Inc()
		failed[lineOf[index[r]]] = true
	}
	var durable []recent
	for i := range b.lines {
		if l := &b.lines[i]; l.receipt.Status == StatusAccepted && !failed[i] {
			durable = append(durable, recent{l.dedupeID, l.digest})
		}
	}
	g.recent.add(durable...)
	return firstErr
}

// records builds the Kafka records of b in line order, in one slab, and
// the line each came from. Records of one request share their headers.
func (g *Gateway) records(ctx context.Context, b *batch) ([]kgo.Record, []int, error) {
	n := 0
	for i := range b.lines {
		if b.lines[i].receipt.Status != StatusDuplicate {
			n++
		}
	}
	recs := make([]kgo.Record, 0, n)
	lineOf := make([]int, 0, n)
	accepted := g.headers(b.pol, b.principal, "")
	for i := range b.lines {
		l := &b.lines[i]
		if l.receipt.Status == StatusDuplicate {
			continue
		}
		headers := accepted
		if l.rejected {
			headers = g.headers(b.pol, b.principal, l.receipt.Reason)
		}
		if !l.fanout {
			recs = append(recs, kgo.Record{Topic: l.topic, Key: l.key, Value: l.value, Headers: headers})
			lineOf = append(lineOf, i)
			continue
		}
		parts, err := g.partitions(ctx, l.topic)
		if err != nil {
			// Nothing has been produced yet: fail the request whole.
			g.m.produceErrors.WithLabelValues(l.topic).Inc()
			return nil, nil, fmt.Errorf("partition count of %s for scan marker fan-out: %w", l.topic, err)
		}
		fctx := withFanout(ctx)
		for p := range parts {
			recs = append(recs, kgo.Record{Topic: l.topic, Key: l.key, Value: l.value, Headers: headers, Partition: p, Context: fctx})
			lineOf = append(lineOf, i)
		}
	}
	return recs, lineOf, nil
}
