package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	json "github.com/segmentio/encoding/json"
)

// Defaults of FeedOptions.
const (
	DefaultBatchLines = 1000
	DefaultMaxRetries = 30
	DefaultMaxBackoff = 5 * time.Second
)

// DefaultFeedOptions returns FeedOptions with the defaults written out.
func DefaultFeedOptions() FeedOptions {
	return FeedOptions{BatchLines: DefaultBatchLines, MaxRetries: DefaultMaxRetries, MaxBackoff: DefaultMaxBackoff}
}

// FeedOptions configures Feed. The zero value uses the defaults.
type FeedOptions struct {
	// BatchLines is the number of NDJSON lines per request. Default 1000.
	BatchLines int
	// Client sends the requests. Default: a client with a 60s timeout.
	Client *http.Client
	// MaxRetries bounds the retries of one batch after 503, 429, another
	// 5xx or a transport error. Default 30.
	MaxRetries int
	// MaxBackoff caps the wait between retries when the gateway sends no
	// Retry-After. Default 5s.
	MaxBackoff time.Duration
	// Progress, when set, is called after every batch with the running
	// totals.
	Progress func(FeedStats)
}

// FeedStats counts what Feed sent and what the gateway answered.
type FeedStats struct {
	Events    int   // lines sent (redeliveries included)
	Batches   int   // requests that completed
	Bytes     int64 // request body bytes of completed batches
	Retries   int   // retried requests
	Accepted  int   // gateway counts, summed over batches
	Duplicate int
	Rejected  int
	// RejectedReceipts holds up to 10 receipts of rejected lines, raw.
	RejectedReceipts []json.RawMessage
}

// ingestResponse is the gateway's answer to POST /v1/events.
type ingestResponse struct {
	Accepted  int               `json:"accepted"`
	Duplicate int               `json:"duplicate"`
	Rejected  int               `json:"rejected"`
	Receipts  []json.RawMessage `json:"receipts"`
}

// Feed posts src's events to the ingest gateway at baseURL
// (POST <baseURL>/v1/events, NDJSON, Authorization: Bearer apiKey) in
// emission order, one batch at a time, so the gateway sees the stream in
// the order the ground truth assumes. 503 and 429 are retried after
// Retry-After (or exponential backoff), other 5xx and transport errors with
// backoff; any other non-2xx fails with a *StatusError.
func Feed(ctx context.Context, baseURL, apiKey string, src Source, opts FeedOptions) (FeedStats, error) {
	if opts.BatchLines <= 0 {
		opts.BatchLines = DefaultBatchLines
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 60 * time.Second}
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = DefaultMaxRetries
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	f := &feeder{ctx: ctx, url: strings.TrimRight(baseURL, "/") + "/v1/events", key: apiKey, opts: opts}
	err := src.Emit(func(ev *Event) error {
		f.body = append(f.body, ev.Line...)
		f.body = append(f.body, '\n')
		f.lines++
		if f.lines >= opts.BatchLines {
			return f.post()
		}
		return nil
	})
	if err == nil && f.lines > 0 {
		err = f.post()
	}
	return f.stats, err
}

type feeder struct {
	ctx   context.Context
	url   string
	key   string
	opts  FeedOptions
	body  []byte
	lines int
	stats FeedStats
}

func (f *feeder) post() error {
	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		wait, err := f.try()
		if err == nil {
			f.stats.Events += f.lines
			f.stats.Batches++
			f.stats.Bytes += int64(len(f.body))
			f.body, f.lines = f.body[:0], 0
			if f.opts.Progress != nil {
				f.opts.Progress(f.stats)
			}
			return nil
		}
		var se *StatusError
		if errors.As(err, &se) && !retryable(se.StatusCode) {
			return err
		}
		if ctxErr := f.ctx.Err(); ctxErr != nil {
			return fmt.Errorf("feed batch %d: %w", f.stats.Batches, ctxErr)
		}
		if attempt >= f.opts.MaxRetries {
			return fmt.Errorf("feed batch %d: giving up after %d retries: %w", f.stats.Batches, attempt, err)
		}
		if wait < 0 {
			wait = backoff
			backoff = min(2*backoff, f.opts.MaxBackoff)
		}
		f.stats.Retries++
		t := time.NewTimer(wait)
		select {
		case <-f.ctx.Done():
			t.Stop()
			return fmt.Errorf("feed batch %d: %w", f.stats.Batches, f.ctx.Err())
		case <-t.C:
		}
	}
}

func retryable(code int) bool {
	return code == http.StatusTooManyRequests || code >= 500
}

// try sends the batch once; wait is the gateway's Retry-After, or -1 when
// it sent none.
func (f *feeder) try() (wait time.Duration, err error) {
	wait = -1
	req, err := http.NewRequestWithContext(f.ctx, http.MethodPost, f.url, bytes.NewReader(f.body))
	if err != nil {
		return wait, &StatusError{StatusCode: 0, Body: err.Error(), Batch: f.stats.Batches}
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Authorization", "Bearer "+f.key)
	resp, err := f.opts.Client.Do(req)
	if err != nil {
		return wait, fmt.Errorf("post batch %d: %w", f.stats.Batches, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return wait, fmt.Errorf("read response of batch %d: %w", f.stats.Batches, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if s := resp.Header.Get("Retry-After"); s != "" {
			if secs, perr := strconv.Atoi(s); perr == nil && secs >= 0 {
				wait = time.Duration(secs) * time.Second
			}
		}
		body := string(raw)
		if len(body) > 512 {
			body = body[:512]
		}
		return wait, &StatusError{StatusCode: resp.StatusCode, Body: strings.TrimSpace(body), Batch: f.stats.Batches}
	}
	var r ingestResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return wait, &StatusError{StatusCode: resp.StatusCode, Body: "undecodable response: " + err.Error(), Batch: f.stats.Batches}
	}
	f.stats.Accepted += r.Accepted
	f.stats.Duplicate += r.Duplicate
	f.stats.Rejected += r.Rejected
	if r.Rejected > 0 {
		for _, rc := range r.Receipts {
			if len(f.stats.RejectedReceipts) >= 10 {
				break
			}
			if bytes.Contains(rc, []byte(`"rejected"`)) || bytes.Contains(rc, []byte(`"reason"`)) {
				f.stats.RejectedReceipts = append(f.stats.RejectedReceipts, append(json.RawMessage(nil), rc...))
			}
		}
	}
	return 0, nil
}
