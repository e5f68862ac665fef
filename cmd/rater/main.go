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
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/billing/rater"
	"github.com/driftline/driftline/pipeline/billing/reconcile"
	"github.com/driftline/driftline/pipeline/ingest"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/service/stage"
)

func main() { service.Main("rater", run) }

func run() error {
	st := stage.New("rater", "DRIFTLINE_RATER_ADDR", service.DefaultRaterAddr)
	fs, ro, bo := flag.CommandLine, rater.DefaultOptions(), reconcile.DefaultOptions()
	ro.TransactionalID = service.Env("DRIFTLINE_RATER_TRANSACTIONAL_ID", ro.TransactionalID)
	ro.Compression = service.Env("DRIFTLINE_RATER_COMPRESSION", ro.Compression)
	st.StageFlags("rater", "raters", &ro.StageOptions)
	st.StageFlags("billing", "billing reconcilers", &bo.StageOptions)
	st.RoundFlags("billing", "reconciler", &bo.RoundOptions)
	st.CPUProfileFlag()
	bookPath := fs.String("rater.priceBook", service.Env("DRIFTLINE_RATER_PRICEBOOK", "deploy/pricebook.json"), "price book file (env DRIFTLINE_RATER_PRICEBOOK); reloaded on change and on SIGHUP")
	reload := fs.Duration("rater.priceBookCheck", 2*time.Second, "how often the price book file is checked for changes; SIGHUP reloads at once")
	finishRater := ro.RegisterFlags(fs)
	billingOn := fs.Bool("billing.enabled", true, "run the billing reconciler in this process (needs ClickHouse); false rates only")
	raterOn := fs.Bool("rater.enabled", true, "rate usage in this process; false runs only the billing reconciler (for a reconciler of its own, or to measure each apart)")
	bo.RegisterFlags(fs)
	ctx, err := st.Start()
	if err != nil {
		return err
	}
	defer st.Close()
	finishRater()
	hup, stopHup := service.Hangup()
	defer stopHup()

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
	if !*raterOn && !*billingOn {
		return fmt.Errorf("-rater.enabled=false and -billing.enabled=false leave nothing to run")
	}
	if !*billingOn || !*raterOn { // one of the two alone paces its collector: docs/sizing.md
		ro.GCHeadroom = rater.TuneGC(!*raterOn)
		bo.GCHeadroom = ro.GCHeadroom
	}
	ro.Prices, bo.Prices = prices, prices
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

	slog.Info("rater started", "http", st.Addr, "rating", *raterOn, "transactions", !ro.DisableTransactions, "transactional_id", ro.TransactionalID, "billing", *billingOn)
	// The rater and the reconciler run side by side; when the reconciler
	// fails, the process stops. Rating never waits for ClickHouse: the
	// reconciler connects (and retries) on its own.
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	billingDone := make(chan error, 1)
	if *billingOn {
		qcl, err := st.Common.KafkaClient(kgo.RequiredAcks(kgo.AllISRAcks())) // secured as every client of the process
		if err != nil {
			return err
		}
		defer qcl.Close()
		if bo.Quarantine, err = ingest.NewQuarantiner(qcl, ingest.QuarantinerOptions{ActorID: "SYSTEM::billing", Topic: st.Common.Topics.Quarantine, Registerer: st.Registry}); err != nil {
			return err
		}
		go func() { billingDone <- runBilling(runCtx, cancelRun, st.Common, bo) }()
	} else {
		billingDone <- nil
	}
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

// runBilling runs the billing reconciler once ClickHouse answers, waiting
// for it until ctx ends (so that the rater rates while ClickHouse is
// away); when the reconciler fails it stops the rater too (cancel).
func runBilling(ctx context.Context, cancel context.CancelFunc, common *service.Common, opts reconcile.Options) error {
	err := reconcile.RunOnClickHouse(ctx, opts, func(ctx context.Context) (driver.Conn, error) {
		return readmodel.OpenWait(ctx, common.ClickHouse, slog.With("component", "billing"), "rating goes on; set -billing.enabled=false to rate only")
	})
	if err != nil {
		slog.Error("rater: billing reconciler failed", "err", err)
		cancel()
	}
	return err
}
