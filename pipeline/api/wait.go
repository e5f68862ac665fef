package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Read-your-writes: any endpoint takes
//
//	wait_watermark  RFC 3339 time: answer only once every partition of the
//	                joiner (Options.WaitConsumer) reports a watermark at or
//	                past it in consumer_progress
//	wait_timeout    Go duration bounding the wait, default 10s, at most
//	                Options.MaxWait
//
// A producer that wrote an event at occurred_at T and wants to read its
// effect asks with wait_watermark = T + allowed lateness. Past the timeout
// the answer is 504 with a WaitTimeoutError body.

// waitPoll is how often consumer_progress is read while waiting.
const waitPoll = 100 * time.Millisecond

// DefaultWaitTimeout is the wait when wait_timeout is not given.
const DefaultWaitTimeout = 10 * time.Second

// takeWait removes the wait parameters from r's query and parses them;
// zero watermark when not asked.
func (s *Server) takeWait(r *http.Request) (wm time.Time, timeout time.Duration, err error) {
	q := r.URL.Query()
	_, hasWM := q["wait_watermark"]
	_, hasTO := q["wait_timeout"]
	if !hasWM && !hasTO {
		return wm, 0, nil
	}
	sub := url.Values{"wait_timeout": q["wait_timeout"]}
	q.Del("wait_timeout")
	wmRaw := q["wait_watermark"]
	q.Del("wait_watermark")
	r.URL.RawQuery = q.Encode()
	if len(wmRaw) != 1 {
		return wm, 0, &ParamError{Param: "wait_watermark", Reason: "give one RFC 3339 time (wait_timeout alone waits for nothing)"}
	}
	wm, err = time.Parse(time.RFC3339, wmRaw[0])
	if err != nil {
		return wm, 0, &ParamError{Param: "wait_watermark", Value: wmRaw[0], Reason: "must be an RFC 3339 time such as 2026-11-21T10:15:30Z"}
	}
	timeout, err = parseDuration(sub, "wait_timeout")
	if err != nil {
		return wm, 0, err
	}
	if timeout == 0 {
		timeout = min(DefaultWaitTimeout, s.opts.MaxWait)
	}
	if timeout > s.opts.MaxWait {
		return wm, 0, &ParamError{Param: "wait_timeout", Value: sub.Get("wait_timeout"), Reason: "at most " + s.opts.MaxWait.String() + " (the server's -query.maxWait)"}
	}
	return wm, timeout, nil
}

// waitWatermark polls consumer_progress until every partition of the
// joiner is at or past wm, or timeout passes.
func (s *Server) waitWatermark(ctx context.Context, wm time.Time, timeout time.Duration) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	var (
		low     time.Time
		parts   int
		waiting bool // counted in the waiting gauge
	)
	defer func() {
		if waiting {
			s.metrics.waiting.Dec()
		}
	}()
	timedOut := func() error {
		s.metrics.waits.WithLabelValues("timeout").Inc()
		e := &WaitTimeoutError{Consumer: s.opts.WaitConsumer, Want: wm.UTC(), Timeout: timeout, Partitions: parts}
		if parts > 0 {
			l := low.UTC()
			e.Reached = &l
		}
		return e
	}
	for {
		l, n, err := s.read.LowWatermark(ctx, s.opts.WaitConsumer)
		if err == nil {
			low, parts = l, n
			if parts >= s.opts.WaitPartitions && parts > 0 && !low.Before(wm) {
				s.metrics.waits.WithLabelValues("reached").Inc()
				s.metrics.waitSeconds.Observe(time.Since(start).Seconds())
				return nil
			}
		}
		// A read cut by the wait's own deadline is the wait running out,
		// whatever the driver calls it (it may say "i/o timeout" a moment
		// before the context reports the deadline).
		expired := ctx.Err() != nil || !time.Now().Before(deadline)
		if err != nil && !expired {
			return err
		}
		if expired {
			return timedOut()
		}
		if !waiting {
			waiting = true
			s.metrics.waiting.Inc()
		}
		select {
		case <-ctx.Done():
			return timedOut()
		case <-tick.C:
		}
	}
}

// WaitTimeoutError is a read-your-writes wait that ran out: the server
// answers it as 504.
type WaitTimeoutError struct {
	Consumer   string        // whose watermark was awaited
	Want       time.Time     // the asked wait_watermark
	Reached    *time.Time    // the lowest partition watermark when the wait ended; nil if none reported
	Partitions int           // partitions that reported progress
	Timeout    time.Duration // the wait bound
}

func (e *WaitTimeoutError) Error() string {
	reached := "no partition has reported progress"
	if e.Reached != nil {
		reached = fmt.Sprintf("the lowest of %d partitions is at %s", e.Partitions, e.Reached.Format(time.RFC3339))
	}
	return fmt.Sprintf("wait_watermark %s not reached by %s within %s: %s; Possible solutions: retry later, raise wait_timeout, or check the joiner's lag in /v1/status",
		e.Want.Format(time.RFC3339), e.Consumer, e.Timeout, reached)
}
