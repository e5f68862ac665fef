package demo

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/client"
)

// waitCaughtUp polls /v1/status until the joiner's consumer lag is 0, or
// the finding counts have not changed for stableFor, or timeout passes.
func waitCaughtUp(ctx context.Context, out io.Writer, qc *client.Client, timeout time.Duration) (*apitypes.Status, error) {
	const stableFor = 10 * time.Second
	fmt.Fprintf(out, "waiting for the pipeline to catch up (at most %s)\n", timeout)
	deadline := time.Now().Add(timeout)
	var (
		last        *apitypes.Status
		lastKey     string
		stableSince = time.Now()
		lastPrint   time.Time
	)
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		status, err := qc.Status(sctx)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil {
			lag, lagKnown := totalLag(status)
			key := fmt.Sprintf("%d/%d/%d", status.Findings.Open, status.Findings.Resolved, events(status))
			if key != lastKey {
				lastKey, stableSince = key, time.Now()
			}
			last = status
			if time.Since(lastPrint) >= 2*time.Second {
				lagText := "unknown"
				if lagKnown {
					lagText = fmt.Sprint(lag)
				}
				fmt.Fprintf(out, "  lag %s, events applied %d, open findings %d, resolved %d\n",
					lagText, events(status), status.Findings.Open, status.Findings.Resolved)
				lastPrint = time.Now()
			}
			switch {
			case lagKnown && lag == 0 && events(status) > 0:
				fmt.Fprintln(out, "caught up: consumer lag is 0")
				return status, nil
			case status.Findings.Open+status.Findings.Resolved > 0 && time.Since(stableSince) >= stableFor:
				fmt.Fprintf(out, "caught up: findings unchanged for %s\n", stableFor)
				return status, nil
			}
		} else if time.Since(lastPrint) >= 2*time.Second {
			fmt.Fprintf(out, "  query API: %v\n", err)
			lastPrint = time.Now()
		}
		if time.Now().After(deadline) {
			if last == nil {
				return nil, fmt.Errorf("query API at %s did not answer within %s: %w", qc.BaseURL, timeout, err)
			}
			fmt.Fprintf(out, "not caught up within %s; the summary below may be partial (raise -run.catchUp)\n", timeout)
			return last, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// totalLag sums the lag of every group the query API watches; known is
// false if any group's lag is not known.
func totalLag(st *apitypes.Status) (lag int64, known bool) {
	if st.Lag.State != apitypes.LagOK || len(st.Lag.Groups) == 0 {
		return 0, false
	}
	for _, g := range st.Lag.Groups {
		if g.Total == nil {
			return 0, false
		}
		lag += *g.Total
	}
	return lag, true
}

func events(st *apitypes.Status) uint64 {
	var n uint64
	for _, c := range st.Consumers {
		n += c.Events
	}
	return n
}

// waitBilling polls the open billing mismatches until they equal the
// fleet's truth, or have not changed for 10s, or timeout passes: the
// billing reconciler runs in the rater, beside the joiner the status
// endpoint reports on.
func waitBilling(ctx context.Context, qc *client.Client, want map[string]uint64, timeout time.Duration) (map[string]uint64, error) {
	const stableFor = 10 * time.Second
	deadline := time.Now().Add(timeout)
	var (
		last        map[string]uint64
		err         error
		stableSince = time.Now()
	)
	for {
		var got map[string]uint64
		got, err = billingCounts(ctx, qc)
		if err == nil {
			if fmt.Sprint(got) != fmt.Sprint(last) {
				stableSince = time.Now()
			}
			last = got
			if fmt.Sprint(got) == fmt.Sprint(want) || time.Since(stableSince) >= stableFor {
				return got, nil
			}
		}
		if time.Now().After(deadline) {
			return last, err
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
