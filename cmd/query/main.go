// Command query serves the query API and web UI over the ClickHouse read
// model (CONTRACT section 7) and accepts operator actions as commands on
// the commands topic (section 9.2); see package pipeline/api for
// the endpoints and cmd/driftctl for reading it from a shell.
//
//	query -query.addr 127.0.0.1:18081 -clickhouse.addr 127.0.0.1:19000
//	query act retry <evidence_id> reason=redeploy   (as driftctl act)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/alert"
	"github.com/driftline/driftline/pipeline/api/cli"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
	"github.com/driftline/driftline/pipeline/service"
)

func main() {
	// "serve" was the server's subcommand while the binary also held the
	// client; it is still accepted.
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Args = append(os.Args[:1], os.Args[2:]...)
	}
	// "query act ..." takes an operator action, as "driftctl act" does.
	if len(os.Args) > 1 && os.Args[1] == "act" {
		if err := cli.Run("act", os.Args[2:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "query act: "+err.Error())
			os.Exit(1)
		}
		return
	}
	service.Main("query", run)
}

func run() error {
	fs := flag.CommandLine
	common := service.RegisterFlags(fs)
	logOpts := service.LogFlags(fs)
	addr := fs.String("query.addr", service.Env("DRIFTLINE_QUERY_ADDR", service.DefaultQueryAddr), "HTTP listen address of the query API (env DRIFTLINE_QUERY_ADDR)")
	joinerGroup := fs.String("query.joinerGroup", api.DefaultJoinerGroup, "consumer group of the joiner, whose lag /v1/status reports; empty reports no lag")
	queryTimeout := fs.Duration("query.timeout", 10*time.Second, "bound on the ClickHouse work of one request; raise it for very large listings")
	lagTimeout := fs.Duration("query.lagTimeout", 3*time.Second, "bound on asking the broker for lag; past it /v1/status reports the lag unknown instead of waiting")
	maxWait := fs.Duration("query.maxWait", 30*time.Second, "upper bound on a request's wait_timeout (read-your-writes); longer waits hold connections open")
	waitPartitions := fs.Int("query.joinerPartitions", 1, "partitions the joiner reports in consumer_progress; wait_watermark waits for at least this many, so set it to the topics' partition count")
	var webhooks []string
	fs.Func("alert.webhook", "Alertmanager v2 URL (http://host:9093/api/v2/alerts) to push alerts to (CONTRACT 9.3); repeat for several receivers; none sends no alerts", func(v string) error {
		webhooks = append(webhooks, v)
		return nil
	})
	alertInterval := fs.Duration("alert.interval", 15*time.Second, "how often alert conditions are read; shorter alerts sooner, each round reads drift_evidence with FINAL")
	alertLagSLO := fs.Int64("alert.lagSLO", 100000, "consumer lag (records) of the joiner group above which an alert fires")
	shutdownTimeout := fs.Duration("query.shutdownTimeout", 10*time.Second, "how long in-flight requests may finish after SIGTERM before they are cut")
	flag.Parse()
	if _, err := service.SetupLogging(logOpts, os.Stderr); err != nil {
		return err
	}
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: query only serves; the client subcommands (drift, heatmap, attention, billing, automation, node) are driftctl's", flag.Arg(0))
	}
	if !contract.ValidEnvironment(common.Environment) {
		return fmt.Errorf("-env %q: must be local_parity, dev or prod", common.Environment)
	}

	ctx, stop := service.SignalContext()
	defer stop()

	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	conn, err := readmodel.Open(openCtx, common.ClickHouse)
	cancel()
	if err != nil {
		return fmt.Errorf("open clickhouse %s: %w", common.ClickHouse.Addr, err)
	}
	defer conn.Close()

	opts := api.Options{DB: conn, QueryTimeout: *queryTimeout, LagTimeout: *lagTimeout, MaxWait: *maxWait, WaitPartitions: *waitPartitions,
		Topics: common.Topics, Environment: common.Environment, Actions: reader.NewActionLog(conn)}
	if *joinerGroup != "" {
		opts.WaitConsumer = *joinerGroup
	}
	// The broker is optional for a read-only API: without one, or without a
	// group to watch, the status reports lag as not configured.
	if brokers := common.SeedBrokers(); len(brokers) > 0 && *joinerGroup != "" {
		kcl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
		if err != nil {
			return fmt.Errorf("kafka client: %w", err)
		}
		defer kcl.Close()
		opts.Lag = kadm.NewClient(kcl)
		opts.LagGroups = []string{*joinerGroup}
	}
	// Operator actions are commands on the commands topic (acks=all, the
	// murmur2 partitioner, keyed by the finding's identity); without a
	// broker the action endpoints answer 503.
	if brokers := common.SeedBrokers(); len(brokers) > 0 {
		ccl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
		if err != nil {
			return fmt.Errorf("kafka client: %w", err)
		}
		defer ccl.Close()
		opts.Commands = ccl
	}
	srv, err := api.New(opts)
	if err != nil {
		return err
	}

	if len(webhooks) > 0 {
		aopts := alert.Options{Webhooks: webhooks, Interval: *alertInterval, LagSLO: *alertLagSLO, GeneratorURL: "http://" + *addr + "/ui/"}
		if lag := opts.Lag; lag != nil {
			aopts.Lag = func(ctx context.Context) (map[string]int64, error) {
				lags, err := lag.Lag(ctx, opts.LagGroups...)
				if err != nil {
					return nil, err
				}
				out := map[string]int64{}
				for g, l := range lags {
					if err := l.Error(); err != nil {
						return nil, err
					}
					out[g] = l.Lag.Total()
				}
				return out, nil
			}
		}
		snd, err := alert.New(aopts, reader.New(conn, reader.Options{}), reader.NewAlertLog(conn))
		if err != nil {
			return err
		}
		go func() { _ = snd.Run(ctx) }()
		slog.Info("alerts", "webhooks", len(webhooks), "interval", *alertInterval)
	}

	hs := &http.Server{Addr: *addr, Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.ListenAndServe() }()
	slog.Info("query api listening", "addr", *addr, "ui", "http://"+*addr+"/ui/", "clickhouse", common.ClickHouse.Addr, "database", common.ClickHouse.Database)

	select {
	case err := <-errc:
		return fmt.Errorf("listen %s: %w", *addr, err)
	case <-ctx.Done():
	}
	slog.Info("query api stopping")
	sctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
