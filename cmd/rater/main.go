// Command rater rates usage.events against the versioned usage-unit price
// book and writes billing.rated exactly once (package
// pipeline/billing/rater), and runs the billing reconciler beside it
// (package pipeline/billing/reconcile), which writes billing_mismatch,
// rated_usage and billing_window to ClickHouse. The price book is reloaded
// when its file changes or on SIGHUP; a file that fails validation is
// refused and the previous book stays in use. Run one process per
// -rater.transactionalID: a restart fences its crashed incarnation.
//
//	rater -kafka.brokers 127.0.0.1:19092 -rater.priceBook deploy/pricebook.json
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/billing/rater"
	"github.com/driftline/driftline/pipeline/billing/reconcile"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/ingest"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/service/stage"
)

func main() { service.Main("rater", run) }

func run() error {
	st := stage.New("rater", "DRIFTLINE_RATER_ADDR", service.DefaultRaterAddr)
	fs, ro, bo := flag.CommandLine, rater.DefaultOptions(), reconcile.DefaultOptions()
	st.StageFlags("rater", "raters", &ro.StageOptions)
	st.StageFlags("billing", "billing reconcilers", &bo.StageOptions)
	st.RoundFlags("billing", "reconciler", &bo.RoundOptions)
	st.CPUProfileFlag()
	bookPath := fs.String("rater.priceBook", service.Env("DRIFTLINE_RATER_PRICEBOOK", "deploy/pricebook.json"), "price book file (env DRIFTLINE_RATER_PRICEBOOK); reloaded on change and on SIGHUP")
	reload := fs.Duration("rater.priceBookCheck", 2*time.Second, "how often the price book file is checked for changes; SIGHUP reloads at once")
	fs.StringVar(&ro.TransactionalID, "rater.transactionalID", service.Env("DRIFTLINE_RATER_TRANSACTIONAL_ID", ro.TransactionalID), "transactional id of this instance (env DRIFTLINE_RATER_TRANSACTIONAL_ID): stable across its restarts, distinct between instances running at once")
	fs.StringVar(&ro.InstanceID, "rater.instanceID", ro.InstanceID, "static group membership id (default: the transactional id): a restart takes over the partitions at once instead of after the session timeout; \"-\" for dynamic membership")
	txns := fs.Bool("rater.transactions", !ro.DisableTransactions, "rate exactly-once in Kafka transactions; false is at-least-once and only for measuring the transactions' overhead")
	fs.DurationVar(&ro.TransactionTimeout, "rater.transactionTimeout", ro.TransactionTimeout, "how long a crashed rater's open transaction may hold back read_committed consumers if no restart fences it")
	fs.IntVar(&ro.MaxBatch, "rater.maxBatch", ro.MaxBatch, "records per transaction; larger amortises commits, smaller redoes less after a crash")
	fs.DurationVar(&ro.Horizon, "rater.horizon", ro.Horizon, "event time a usage key is remembered for after its usage occurred (bounds memory, about 100 bytes a key); usage that occurred longer before its partition's watermark is quarantined as "+string(contract.ReasonLate)+", never rated")
	currencies := fs.String("rater.currencies", "", "comma-separated currencies this rater may bill (empty: any the price book names); other usage is quarantined")
	billingOn := fs.Bool("billing.enabled", true, "run the billing reconciler in this process (needs ClickHouse); false rates only")
	raterOn := fs.Bool("rater.enabled", true, "rate usage in this process; false runs only the billing reconciler (for a reconciler of its own, or to measure each apart)")
	fs.DurationVar(&bo.Rules.RatingGrace, "billing.ratingGrace", bo.Rules.RatingGrace, "event time accepted usage may wait for its rated line before it is usage_not_rated; shorter flags a slow rater sooner but raises findings that resolve when it catches up")
	fs.DurationVar(&bo.Rules.LedgerGrace, "billing.ledgerGrace", bo.Rules.LedgerGrace, "event time a rated line may wait for its ledger entry before it is rated_not_ledgered; must exceed the ledger's normal posting delay")
	fs.DurationVar(&bo.MaxClockSkew, "billing.maxClockSkew", bo.MaxClockSkew, "how far an event's occurred_at may lie ahead of its record's broker timestamp; later events are counted (clock_skew) and not applied, and accepted ones move event time no further than their broker timestamp. Negative disables the check")
	fs.DurationVar(&bo.Rules.AllowedLateness, "billing.allowedLateness", bo.Rules.AllowedLateness, "how far the billing watermark trails the newest event time; larger tolerates more disorder but delays grace-based findings")
	fs.DurationVar(&bo.Rules.Horizon, "billing.horizon", bo.Rules.Horizon, "event time after a conservation window's end at which its settled usage is dropped from memory, and for which a usage key is remembered after its usage occurred (bounds memory; a later change for dropped usage is not counted in its window, and usage that occurred longer before the partition's watermark is quarantined as "+string(contract.ReasonLate)+", never applied)")
	ctx, err := st.Start()
	if err != nil {
		return err
	}
	defer st.Close()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	prices, err := pricebook.Open(*bookPath, slog.Default())
	if err != nil {
		return err
	}
	slog.Info("price book loaded", "path", *bookPath, "digest", prices.Book().Digest(), "units", prices.Book().Units())

	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := st.Common.EnsureTopics(startCtx); err != nil {
		return err
	}
	ro.Currencies = strings.FieldsFunc(*currencies, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	if !*raterOn && !*billingOn {
		return fmt.Errorf("-rater.enabled=false and -billing.enabled=false leave nothing to run")
	}
	if (!*billingOn || !*raterOn) && os.Getenv("GOGC") == "" {
		// The rater's heap is mostly its usage keys, arenas without
		// pointers that a collection does not scan: collecting at half
		// the live heap instead of all of it costs little CPU and keeps
		// its RSS nearer the keys' size (docs/sizing.md). The reconciler
		// alone goes further: its usage states and their strings are
		// pointer-free too (a slab and an arena), so a collection marks
		// little more than the round's records and rows, and a quarter
		// of the live heap as headroom bounds its RSS at 1.25 times its
		// state. Both in one process keep Go's default.
		gc := 50
		if !*raterOn {
			gc = 25
		}
		debug.SetGCPercent(gc)
	}
	ro.Prices, bo.Prices, ro.DisableTransactions = prices, prices, !*txns
	var rt *rater.Rater
	if *raterOn {
		if rt, err = rater.New(startCtx, ro); err != nil {
			return err
		}
		rt.WatchPrices()
	}
	srv := st.Serve(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "ok price_book=%s\n", prices.Book().Digest())
	})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		prices.Watch(ctx, *reload, hup)
	}()

	slog.Info("rater started", "http", st.Addr, "rating", *raterOn, "transactions", *txns, "transactional_id", ro.TransactionalID, "billing", *billingOn)
	// The rater and the reconciler run side by side; when the reconciler
	// fails, the process stops. Rating never waits for ClickHouse: the
	// reconciler connects (and retries) on its own.
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	billingDone := make(chan error, 1)
	if *billingOn {
		qcl, err := kgo.NewClient(kgo.SeedBrokers(st.Common.SeedBrokers()...), kgo.RequiredAcks(kgo.AllISRAcks()))
		if err != nil {
			return fmt.Errorf("kafka client: %w", err)
		}
		defer qcl.Close()
		if bo.Quarantine, err = ingest.NewQuarantiner(qcl, ingest.QuarantinerOptions{ActorID: "SYSTEM::billing", Topic: st.Common.Topics.Quarantine, Registerer: st.Registry}); err != nil {
			return err
		}
	}
	go func() { billingDone <- runBilling(runCtx, cancelRun, *billingOn, st.Common, bo) }()
	var runErr error
	if rt != nil {
		runErr = rt.Run(runCtx)
	} else {
		<-runCtx.Done()
	}
	cancelRun()
	if err := <-billingDone; runErr == nil && err != nil {
		runErr = fmt.Errorf("billing: %w", err)
	}

	// Stop in reverse order: the loop has ended its last round; stop
	// reloading, then the HTTP server.
	st.Stop()
	<-watchDone
	srv.Shutdown()
	return runErr
}

// runBilling runs the billing reconciler when enabled. It connects to
// ClickHouse, waiting until ctx ends (so that the rater rates while
// ClickHouse is away), and when the reconciler fails it stops the rater
// too (cancel).
func runBilling(ctx context.Context, cancel context.CancelFunc, enabled bool, common *service.Common, opts reconcile.Options) (err error) {
	if !enabled {
		return nil
	}
	defer func() {
		if err != nil {
			slog.Error("rater: billing reconciler failed", "err", err)
			cancel()
		}
	}()
	conn, err := readmodel.OpenWait(ctx, common.ClickHouse, slog.With("component", "billing"),
		"rating goes on; set -billing.enabled=false to rate only")
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer conn.Close()
	rec, err := reconcile.New(ctx, opts, reconcile.NewClickHouse(conn))
	if err != nil {
		return err
	}
	slog.Info("billing reconciler started", "group", opts.Group, "clickhouse", common.ClickHouse.Addr)
	return rec.Run(ctx)
}
