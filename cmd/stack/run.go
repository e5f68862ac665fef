package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/internal/stack"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/client"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/service"
)

func cmdRun(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	c := registerCommon(fs)
	catchUp := fs.Duration("run.catchUp", 3*time.Minute,
		"how long to wait for the joiner to process the fed fleet before printing the summary anyway; a slow machine may need more")
	stay := fs.Bool("run.stay", true, "after the summary, keep a stack this command started running until Ctrl-C; false stops it at once")
	apiKey := fs.String("run.apiKey", service.Env("DRIFTLINE_API_KEY", service.DefaultLocalAPIKey), "API key the fleet is fed with (env DRIFTLINE_API_KEY)")
	fcfg := fleet.DefaultConfig()
	fcfg.Ledger.Enabled = true // post ledger entries, so every billing mismatch kind shows up
	fcfg.RegisterFlags(fs)
	_ = fs.Parse(args)
	out := os.Stdout
	startSet := false
	fs.Visit(func(f *flag.Flag) { startSet = startSet || f.Name == "fleet.start" })
	if !startSet {
		// Let the fleet's event time end about now, so ages and watermark
		// lag read naturally in the API and UI; -fleet.start pins it.
		fcfg.Start = time.Now().UTC().Truncate(time.Minute).Add(-time.Duration(fcfg.Rounds) * fcfg.RoundInterval)
	}

	ctx, stop := signalContext()
	defer stop()

	// Use a stack already running in this directory (make up); otherwise
	// start one and own it.
	var s *stack.Stack
	st, running, err := stack.ReadState(c.dir)
	if err == nil && running && st.Status == stack.StatusReady {
		fmt.Fprintf(out, "using the stack already running in %s (pid %d)\n", st.Dir, st.Pid)
	} else {
		fmt.Fprintf(out, "starting the stack in %s (log lines below; children log to %s/log)\n", c.dir, c.dir)
		s, err = stack.Start(ctx, c.options(os.Stderr))
		if err != nil {
			return err
		}
		st = s.State()
	}
	stopStack := func() error {
		if s == nil {
			return nil
		}
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return s.Stop(sctx)
	}

	if err := runFleet(ctx, out, st, fcfg, *apiKey, *catchUp); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(out, "interrupted")
			return stopStack()
		}
		_ = stopStack()
		return err
	}
	if s == nil || !*stay {
		return stopStack()
	}
	fmt.Fprintln(out, "\nthe stack keeps running; Ctrl-C stops it (running `make run` again reuses its data)")
	return waitAndStop(ctx, s, os.Stderr)
}

// runFleet feeds the fleet, waits for the pipeline to catch up and prints
// the summary.
func runFleet(ctx context.Context, out io.Writer, st stack.State, fcfg fleet.Config, apiKey string, catchUp time.Duration) error {
	gen, err := fleet.New(fcfg)
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	fmt.Fprintf(out, "\nfeeding a synthetic fleet to %s/v1/events\n", st.Ingest)
	start := time.Now()
	if err := feed(ctx, out, gen, st.Ingest, apiKey); err != nil {
		return fmt.Errorf("feed fleet: %w", err)
	}
	fmt.Fprintf(out, "fed in %s\n", time.Since(start).Round(time.Millisecond))

	qc := &client.Client{BaseURL: st.Query}
	status, err := waitCaughtUp(ctx, out, qc, catchUp)
	if err != nil {
		return err
	}
	truth := gen.Truth()
	expBilling := map[string]uint64{}
	for _, a := range truth.Usage.Anomalies {
		expBilling[a.Kind]++
	}
	billing, berr := waitBilling(ctx, qc, expBilling, catchUp)
	printSummary(out, st, status, expectedOpen(truth), billing, expBilling, berr, apiKey)
	return nil
}

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

// billingCounts counts open billing mismatches by kind (CONTRACT section
// 6): the totals of /v1/billing/mismatches cover every open mismatch, per
// currency and kind.
func billingCounts(ctx context.Context, qc *client.Client) (map[string]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	p, err := qc.BillingMismatches(ctx, url.Values{"status": {string(contract.StatusOpen)}, "limit": {"1"}})
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, t := range p.Totals.ByKind {
		out[t.Kind] += t.Count
	}
	return out, nil
}

// expectedOpen counts the fleet's ground-truth open findings by
// classification, to show beside what the pipeline found.
func expectedOpen(t *fleet.Truth) map[string]uint64 {
	m := map[string]uint64{}
	for _, f := range t.Findings {
		if f.Status == string(contract.StatusOpen) {
			m[f.Classification]++
		}
	}
	return m
}

func printSummary(out io.Writer, st stack.State, status *apitypes.Status, expected, billing, expBilling map[string]uint64, berr error, apiKey string) {
	f := status.Findings
	fmt.Fprintln(out, "\n=== summary ===")
	fmt.Fprintf(out, "open drift findings: %d (critical %d, blocking admission %d), resolved: %d\n",
		f.Open, f.CriticalOpen, f.BlockedAdmissions, f.Resolved)
	fmt.Fprintf(out, "  %-28s %6s %10s\n", "classification", "open", "fleet truth")
	keys := map[string]bool{}
	for k, n := range f.OpenByClassification {
		keys[k] = n > 0
	}
	for k := range expected {
		keys[k] = true
	}
	for _, k := range sortedKeys(keys) {
		if keys[k] {
			fmt.Fprintf(out, "  %-28s %6d %10d\n", k, f.OpenByClassification[k], expected[k])
		}
	}
	if berr != nil {
		fmt.Fprintf(out, "billing mismatches: unknown (%v)\n", berr)
	} else {
		var total uint64
		for _, n := range billing {
			total += n
		}
		fmt.Fprintf(out, "open billing mismatches: %d\n", total)
		fmt.Fprintf(out, "  %-28s %6s %10s\n", "kind", "open", "fleet truth")
		keys := map[string]bool{}
		for k := range billing {
			keys[k] = true
		}
		for k := range expBilling {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			fmt.Fprintf(out, "  %-28s %6d %10d\n", k, billing[k], expBilling[k])
		}
		fmt.Fprintln(out, "  (raised by the billing reconciler in the rater; docs/billing-model.md)")
	}

	q := st.Query
	fmt.Fprintf(out, "\nweb UI: %s/ui/\n", q)
	fmt.Fprintln(out, "query API:", q)
	fmt.Fprintf(out, "  curl -s %s/v1/status\n", q)
	fmt.Fprintf(out, "  curl -s '%s/v1/drift?severity=critical&limit=20'\n", q)
	fmt.Fprintf(out, "  curl -s '%s/v1/drift?classification=identity_mismatch'\n", q)
	fmt.Fprintf(out, "  curl -s %s/v1/heatmap\n", q)
	fmt.Fprintf(out, "  curl -s '%s/v1/billing/mismatches?status=open'\n", q)
	fmt.Fprintf(out, "  curl -s %s/metrics\n", q)
	fmt.Fprintln(out, "ingest gateway:", st.Ingest)
	fmt.Fprintf(out, "  curl -s -H 'Authorization: Bearer %s' --data-binary @events.ndjson %s/v1/events\n", apiKey, st.Ingest)
	host, port := splitHostPort(st.ClickHouse)
	fmt.Fprintln(out, "ClickHouse:")
	fmt.Fprintf(out, "  clickhouse-client --host %s --port %s --database %s\n", host, port, st.Database)
	fmt.Fprintf(out, "  (e.g. SELECT classification, count() FROM drift_evidence FINAL WHERE status = 'open' GROUP BY classification)\n")
	fmt.Fprintf(out, "  (e.g. SELECT kind, count() FROM billing_mismatch FINAL WHERE status = 'open' GROUP BY kind)\n")
	fmt.Fprintln(out, "broker (Kafka protocol):", st.Broker)
	fmt.Fprintln(out, "API key:", apiKey)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func splitHostPort(addr string) (string, string) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return addr, ""
	}
	return strings.Trim(addr[:i], "[]"), addr[i+1:]
}
