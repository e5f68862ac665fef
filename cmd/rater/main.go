// Command rater rates usage.events against the versioned usage-unit price
// book and writes billing.rated exactly once (see package pipeline/rater).
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
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/config"
	"github.com/driftline/driftline/pipeline/pricebook"
	"github.com/driftline/driftline/pipeline/rater"
	"github.com/driftline/driftline/pipeline/topics"
)

func main() {
	if err := run(); err != nil {
		slog.Error("rater: " + err.Error())
		os.Exit(1)
	}
}

func run() error {
	fs := flag.CommandLine
	common := config.RegisterFlags(fs)
	addr := fs.String("rater.addr", config.Env("DRIFTLINE_RATER_ADDR", config.DefaultRaterAddr), "HTTP listen address for /metrics and /healthz (env DRIFTLINE_RATER_ADDR)")
	bookPath := fs.String("rater.priceBook", config.Env("DRIFTLINE_RATER_PRICEBOOK", "deploy/pricebook.json"), "price book file (env DRIFTLINE_RATER_PRICEBOOK); reloaded on change and on SIGHUP")
	reload := fs.Duration("rater.priceBookCheck", 2*time.Second, "how often the price book file is checked for changes; SIGHUP reloads at once")
	group := fs.String("rater.group", "driftline-rater", "consumer group shared by all raters")
	txnID := fs.String("rater.transactionalID", config.Env("DRIFTLINE_RATER_TRANSACTIONAL_ID", "driftline-rater"), "transactional id of this instance (env DRIFTLINE_RATER_TRANSACTIONAL_ID): stable across its restarts, distinct between instances running at once")
	instanceID := fs.String("rater.instanceID", "", "static group membership id (default: the transactional id): a restart takes over the partitions at once instead of after the session timeout; \"-\" for dynamic membership")
	txns := fs.Bool("rater.transactions", true, "rate exactly-once in Kafka transactions; false is at-least-once and only for measuring the transactions' overhead")
	txnTimeout := fs.Duration("rater.transactionTimeout", 10*time.Second, "how long a crashed rater's open transaction may hold back read_committed consumers if no restart fences it")
	maxBatch := fs.Int("rater.maxBatch", 10000, "records per transaction; larger amortises commits, smaller redoes less after a crash")
	currencies := fs.String("rater.currencies", "", "comma-separated currencies this rater may bill (empty: any the price book names); other usage is quarantined")
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

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

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

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "ok price_book=%s\n", prices.Book().Digest())
	})
	hs := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("rater: http server failed", "err", err)
			stop()
		}
	}()

	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		prices.Watch(ctx, *reload, hup)
	}()

	slog.Info("rater started", "http", *addr, "transactions", *txns, "transactional_id", *txnID)
	runErr := rt.Run(ctx)

	// Stop in reverse order: the loop has ended its last round; stop
	// reloading, then the HTTP server.
	stop()
	<-watchDone
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShutdown()
	_ = hs.Shutdown(shutdownCtx)
	return runErr
}
