// Package demo is what `stack run` (make run) shows a newcomer: it feeds a
// synthetic fleet (internal/fleet) through a running stack's ingest
// gateway, waits for the pipeline to catch up, and prints what the
// pipeline found beside the fleet's ground truth, with the commands that
// reach each component.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/internal/stack"
	"github.com/driftline/driftline/pipeline/api/client"
	"github.com/driftline/driftline/pipeline/service"
)

// Options configure Run.
type Options struct {
	// Fleet is the fleet fed. Default: fleet.DefaultConfig() with ledger
	// entries posted, so every billing mismatch kind shows up, and with
	// the fleet core's bad input, which the pipeline must reject. The
	// generator plays the fleet's controllers, the split-brain one
	// included (fleet.RoleSplitBrain).
	Fleet fleet.Config
	// EndNow moves the fleet's start so that its event time ends about
	// now, so ages and watermark lag read naturally in the API and UI.
	// Default true; false keeps Fleet.Start (reproducible event times).
	EndNow bool
	// APIKey is the key the fleet is fed with. Default the local stack's
	// (DRIFTLINE_API_KEY).
	APIKey string
	// CatchUp bounds the wait for the pipeline to process the fleet
	// before the summary is printed anyway. Default 3m.
	CatchUp time.Duration
	// Out receives progress and the summary. Default os.Stdout.
	Out io.Writer
	// Actions is how many retry and how many cleanup actions the demo
	// takes after the summary, for the controller it runs to carry out
	// (controller.go). Default 3; 0 takes none and runs no controller.
	Actions int
}

// DefaultOptions returns the options of `stack run`.
func DefaultOptions() Options {
	cfg := fleet.DefaultConfig()
	cfg.Ledger.Enabled = true
	cfg.Core.BadInput = true
	return Options{
		Fleet:   cfg,
		EndNow:  true,
		APIKey:  service.Env("DRIFTLINE_API_KEY", service.DefaultLocalAPIKey),
		CatchUp: 3 * time.Minute,
		Out:     os.Stdout,
		Actions: 3,
	}
}

// Run feeds the fleet to the stack st describes, waits for the pipeline
// to catch up and prints the summary.
func Run(ctx context.Context, st stack.State, opts Options) error {
	out := opts.Out
	if out == nil {
		out = os.Stdout
	}
	fcfg := opts.Fleet
	if opts.EndNow {
		fcfg.Start = time.Now().UTC().Truncate(time.Minute).Add(-time.Duration(fcfg.Rounds) * fcfg.RoundInterval)
	}
	gen, err := fleet.New(fcfg)
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	qc := &client.Client{BaseURL: st.Query, APIKey: opts.APIKey}
	var earlier uint64
	if opts.EndNow {
		// A fleet whose start is pinned repeats its events byte for
		// byte, and the pipeline drops them as duplicates.
		earlier = earlierEvents(ctx, qc)
	}
	if earlier > 0 {
		fmt.Fprintf(out, "\n%s\n", earlierFeedNote(earlier))
	}
	fmt.Fprintf(out, "\nfeeding a synthetic fleet to %s/v1/events\n", st.Ingest)
	start := time.Now()
	if err := feed(ctx, out, gen, st.Ingest, opts.APIKey); err != nil {
		return fmt.Errorf("feed fleet: %w", err)
	}
	fmt.Fprintf(out, "fed in %s\n", time.Since(start).Round(time.Millisecond))

	status, err := waitCaughtUp(ctx, out, qc, opts.CatchUp)
	if err != nil {
		return err
	}
	truth := gen.Truth()
	expBilling := map[string]uint64{}
	for _, a := range truth.Usage.Anomalies {
		expBilling[a.Kind]++
	}
	billing, berr := waitBilling(ctx, qc, expBilling, opts.CatchUp)
	printSummary(out, st, status, expectedOpen(truth), billing, expBilling, berr, opts.APIKey)
	printFleetCore(ctx, out, apiFleetCore{qc}, truth)
	if earlier > 0 {
		fmt.Fprintln(out, "\nthe open counts above include the earlier feed's findings (see the note before the feed)")
	}

	// The loop of operator actions (docs/actions.md): a controller
	// carries out two requests in three while the stack runs, and a few
	// actions give it requests.
	if opts.Actions > 0 && st.Broker != "" {
		ctl := &controller{brokers: []string{st.Broker}, ingest: st.Ingest, apiKey: opts.APIKey, query: qc, out: out}
		go ctl.run(ctx)
		fmt.Fprintf(out, "\noperator actions (a controller carries out two requests in three; the others reach operator_review at their deadline):\n")
		demoActions(ctx, out, qc, opts.Actions)
	}
	return nil
}

// feed posts the fleet's events in order through the ingest gateway
// (fleet.Feed retries batches the gateway answers as busy) and prints
// progress every two seconds.
func feed(ctx context.Context, out io.Writer, src fleet.Source, url, apiKey string) error {
	lastPrint := time.Now()
	stats, err := fleet.Feed(ctx, url, apiKey, src, fleet.FeedOptions{
		Progress: func(s fleet.FeedStats) {
			if time.Since(lastPrint) >= 2*time.Second {
				fmt.Fprintf(out, "  sent %d events in %d batches (accepted %d, duplicate %d, rejected %d)\n",
					s.Events, s.Batches, s.Accepted, s.Duplicate, s.Rejected)
				lastPrint = time.Now()
			}
		},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sent %d events: accepted %d, duplicate %d, rejected %d (quarantined), %d retried batches\n",
		stats.Events, stats.Accepted, stats.Duplicate, stats.Rejected, stats.Retries)
	for _, r := range stats.RejectedReceipts {
		fmt.Fprintf(out, "  rejected: %s\n", r)
	}
	return nil
}

// earlierEvents returns the events the stack's consumers had applied
// before this feed: more than 0 when `make run` runs again on the data of
// an earlier one. A status that does not come (a stack just started)
// counts as none.
func earlierEvents(ctx context.Context, qc *client.Client) uint64 {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	status, err := qc.Status(sctx)
	if err != nil {
		return 0
	}
	return events(status)
}

// earlierFeedNote says what feeding the fleet again on the data of an
// earlier feed does to the summary.
func earlierFeedNote(earlier uint64) string {
	return fmt.Sprintf("this stack's data already holds an earlier feed (%d events applied). The same fleet is fed again with\n"+
		"event times that end now: its usage repeats the earlier usage_ids with other content, which the billing\n"+
		"reconciler reports as conflicting_usage, and the open counts below are of both feeds while the truth\n"+
		"columns are of this one. `make distclean` removes the data (.driftline/) for a run from empty.", earlier)
}
