// Command rater rates usage.events against the versioned usage-unit price
// book and writes billing.rated exactly once (see package pipeline/billing/rater),
// and runs the billing reconciler beside it (package pipeline/billing/reconcile): a
// member of its own consumer group over usage.events, billing.rated and
// billing.ledger that writes billing_mismatch, rated_usage and the
// per-window conservation rows (billing_window) to ClickHouse, judging unknown units against the same price book.
// The price book is reloaded when its file changes or on SIGHUP; a file
// that fails validation is refused and the previous book stays in use.
//
//	rater -kafka.brokers 127.0.0.1:19092 -rater.priceBook deploy/pricebook.json
//
// Run one process per -rater.transactionalID: restarting an instance with
// its id fences the crashed incarnation's open transaction.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/billing/rater"
	"github.com/driftline/driftline/pipeline/billing/reconcile"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/stream/topics"
)

func main() {
	if err := run(); err != nil {
		slog.Error("rater: " + err.Error())
		os.Exit(1)
	}
}

func run() error {
	fs := flag.CommandLine
	common := service.RegisterFlags(fs)
	addr := fs.String("rater.addr", service.Env("DRIFTLINE_RATER_ADDR", service.DefaultRaterAddr), "HTTP listen address for /metrics and /healthz (env DRIFTLINE_RATER_ADDR)")
	bookPath := fs.String("rater.priceBook", service.Env("DRIFTLINE_RATER_PRICEBOOK", "deploy/pricebook.json"), "price book file (env DRIFTLINE_RATER_PRICEBOOK); reloaded on change and on SIGHUP")
	reload := fs.Duration("rater.priceBookCheck", 2*time.Second, "how often the price book file is checked for changes; SIGHUP reloads at once")
	group := fs.String("rater.group", "driftline-rater", "consumer group shared by all raters")
	txnID := fs.String("rater.transactionalID", service.Env("DRIFTLINE_RATER_TRANSACTIONAL_ID", "driftline-rater"), "transactional id of this instance (env DRIFTLINE_RATER_TRANSACTIONAL_ID): stable across its restarts, distinct between instances running at once")
	instanceID := fs.String("rater.instanceID", "", "static group membership id (default: the transactional id): a restart takes over the partitions at once instead of after the session timeout; \"-\" for dynamic membership")
	txns := fs.Bool("rater.transactions", true, "rate exactly-once in Kafka transactions; false is at-least-once and only for measuring the transactions' overhead")
	txnTimeout := fs.Duration("rater.transactionTimeout", 10*time.Second, "how long a crashed rater's open transaction may hold back read_committed consumers if no restart fences it")
	maxBatch := fs.Int("rater.maxBatch", 10000, "records per transaction; larger amortises commits, smaller redoes less after a crash")
	currencies := fs.String("rater.currencies", "", "comma-separated currencies this rater may bill (empty: any the price book names); other usage is quarantined")
	defRules := reconcile.DefaultRules()
	billingOn := fs.Bool("billing.enabled", true, "run the billing reconciler in this process (needs ClickHouse); false rates only")
	billingGroup := fs.String("billing.group", "driftline-billing", "consumer group shared by all billing reconcilers; every member owns a range of partitions")
	ratingGrace := fs.Duration("billing.ratingGrace", defRules.RatingGrace, "event time accepted usage may wait for its rated line before it is usage_not_rated; shorter flags a slow rater sooner but raises findings that resolve when it catches up")
	ledgerGrace := fs.Duration("billing.ledgerGrace", defRules.LedgerGrace, "event time a rated line may wait for its ledger entry before it is rated_not_ledgered; must exceed the ledger's normal posting delay")
	billingLateness := fs.Duration("billing.allowedLateness", defRules.AllowedLateness, "how far the billing watermark trails the newest event time; larger tolerates more disorder but delays grace-based findings")
	billingHorizon := fs.Duration("billing.horizon", defRules.Horizon, "event time after a conservation window's end at which its settled usage is dropped from memory (bounds memory; a later change for it is not counted in the window)")
	billingQueue := fs.Int("billing.queueRecords", 16384, "records of one topic partition that may wait in the reconciler's merge for an earlier stream before its fetching pauses (bounds memory while usage runs ahead of the rated lines)")
	billingFlush := fs.Duration("billing.flushInterval", 500*time.Millisecond, "longest time reconciled events wait before their rows are written and offsets committed")
	billingCatchUp := fs.Duration("billing.catchUpInterval", 3*time.Second, "longest round while the reconciler is behind by more than one round's events (a restart after downtime, a new group): fewer, larger ClickHouse writes while it catches up; not above -billing.flushInterval turns it off")
	flag.Parse()
	if err := common.Validate(); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	prices, err := pricebook.Open(*bookPath, slog.Default())
	if err != nil {
		return err
	}
	slog.Info("price book loaded", "path", *bookPath, "digest", prices.Book().Digest(), "units", prices.Book().Units())

	reg := service.NewRegistry()

	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if common.CreateTopics {
		cl, err := kgo.NewClient(kgo.SeedBrokers(common.SeedBrokers()...))
		if err != nil {
			return fmt.Errorf("kafka client: %w", err)
		}
		err = topics.Ensure(startCtx, kadm.NewClient(cl), common.Topics, int32(common.Partitions), 1)
		cl.Close()
		if err != nil {
			return err
		}
	}
	var allowed []string
	for _, c := range strings.Split(*currencies, ",") {
		if c = strings.TrimSpace(c); c != "" {
			allowed = append(allowed, c)
		}
	}
	rt, err := rater.New(startCtx, rater.Options{
		Brokers:             common.SeedBrokers(),
		Prices:              prices,
		Group:               *group,
		TransactionalID:     *txnID,
		InstanceID:          *instanceID,
		DisableTransactions: !*txns,
		TransactionTimeout:  *txnTimeout,
		Topics:              common.Topics,
		Environment:         common.Environment,
		Currencies:          allowed,
		MaxBatch:            *maxBatch,
		Registerer:          reg,
	})
	if err != nil {
		return err
	}
	rt.WatchPrices()

	srv := service.Serve(*addr, reg, func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "ok price_book=%s\n", prices.Book().Digest())
	}, func(error) { stop() })

	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		prices.Watch(ctx, *reload, hup)
	}()

	slog.Info("rater started", "http", *addr, "transactions", *txns, "transactional_id", *txnID, "billing", *billingOn)
	// The rater and the reconciler run side by side; when the reconciler
	// fails, the process stops. Rating never waits for ClickHouse: the
	// reconciler connects (and retries) on its own.
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	billingDone := make(chan error, 1)
	if *billingCatchUp <= 0 {
		*billingCatchUp = -1 // off (the zero Option is the default)
	}
	if *billingOn {
		go func() {
			err := runBilling(runCtx, common, reconcile.Options{
				Brokers:         common.SeedBrokers(),
				Prices:          prices,
				Group:           *billingGroup,
				Topics:          common.Topics,
				Environment:     common.Environment,
				Rules:           reconcile.Rules{RatingGrace: *ratingGrace, LedgerGrace: *ledgerGrace, AllowedLateness: *billingLateness, Horizon: *billingHorizon},
				FlushInterval:   *billingFlush,
				CatchUpInterval: *billingCatchUp,
				QueueRecords:    *billingQueue,
				Registerer:      reg,
			})
			if err != nil {
				slog.Error("rater: billing reconciler failed", "err", err)
				cancelRun()
			}
			billingDone <- err
		}()
	} else {
		billingDone <- nil
	}
	runErr := rt.Run(runCtx)
	cancelRun()
	if err := <-billingDone; runErr == nil && err != nil {
		runErr = fmt.Errorf("billing: %w", err)
	}

	// Stop in reverse order: the loop has ended its last round; stop
	// reloading, then the HTTP server.
	stop()
	<-watchDone
	srv.Shutdown()
	return runErr
}

// runBilling connects to ClickHouse (waiting until ctx ends, so that the
// rater rates while ClickHouse is away) and runs the billing reconciler.
func runBilling(ctx context.Context, common *service.Common, opts reconcile.Options) error {
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
