package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/driftline/driftline/pipeline/fleet"
	"github.com/driftline/driftline/pipeline/ingest"
)

// feedBatch is the number of events per ingest request: large enough to
// amortise the request, small enough that a retried batch is cheap.
const feedBatch = 500

// feed posts the fleet's events in order through the ingest gateway, one
// batch at a time, retrying batches the gateway answers as busy, and prints
// progress every two seconds.
func feed(ctx context.Context, out io.Writer, src fleet.Source, url, apiKey string) error {
	cl := &ingest.Client{URL: url, APIKey: apiKey}
	var (
		batch     [][]byte
		sent      int
		total     ingest.Response
		lastPrint = time.Now()
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		resp, err := postRetry(ctx, cl, batch)
		if err != nil {
			return err
		}
		sent += len(batch)
		total.Accepted += resp.Accepted
		total.Duplicate += resp.Duplicate
		total.Rejected += resp.Rejected
		batch = batch[:0]
		if time.Since(lastPrint) >= 2*time.Second {
			fmt.Fprintf(out, "  sent %d events (accepted %d, duplicate %d, rejected %d)\n", sent, total.Accepted, total.Duplicate, total.Rejected)
			lastPrint = time.Now()
		}
		return nil
	}
	err := src.Emit(func(ev *fleet.Event) error {
		batch = append(batch, append([]byte(nil), ev.Line...)) // Line is reused after return
		if len(batch) >= feedBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sent %d events: accepted %d, duplicate %d (redeliveries, or fed before), rejected %d (quarantined)\n",
		sent, total.Accepted, total.Duplicate, total.Rejected)
	return nil
}

// postRetry posts one batch, retrying for up to a minute while the gateway
// says it is busy or cannot reach the broker; nothing of such a batch was
// accepted, so resending it is safe (and dedupe covers the rest).
func postRetry(ctx context.Context, cl *ingest.Client, batch [][]byte) (ingest.Response, error) {
	deadline := time.Now().Add(time.Minute)
	backoff := 100 * time.Millisecond
	for {
		resp, err := cl.Post(ctx, batch)
		var se *ingest.StatusError
		if err == nil || !errors.As(err, &se) || !se.Retryable() || time.Now().After(deadline) {
			return resp, err
		}
		wait := backoff
		if se.RetryAfter > 0 {
			wait = se.RetryAfter
		}
		select {
		case <-ctx.Done():
			return resp, ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
