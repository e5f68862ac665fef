// Command ingest runs the HTTP ingest gateway: POST /v1/events takes NDJSON
// envelopes authenticated by API key and writes them to Kafka (see package
// pipeline/ingest).
//
// Besides the shared flags (pipeline/config), it reads:
//
//	DRIFTLINE_INGEST_ADDR       listen address (-ingest.addr)
//	DRIFTLINE_INGEST_KEYS_FILE  API key allowlist (-ingest.keysFile)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/driftline/driftline/pipeline/config"
	"github.com/driftline/driftline/pipeline/ingest"
)

func main() {
	common := config.RegisterFlags(flag.CommandLine)
	var (
		addr            = flag.String("ingest.addr", config.Env("DRIFTLINE_INGEST_ADDR", config.DefaultIngestAddr), "HTTP listen address of the gateway (/v1/events, /healthz, /metrics)")
		keysFile        = flag.String("ingest.keysFile", config.Env("DRIFTLINE_INGEST_KEYS_FILE", ""), "JSON API key allowlist (SHA-256 digests with actor and permissions); required outside local_parity, where empty admits only the built-in local key")
		maxBody         = flag.Int64("ingest.maxBodyBytes", ingest.DefaultMaxBodyBytes, "largest request body; larger answers 413. Memory use is up to maxInflight times this")
		maxInflight     = flag.Int("ingest.maxInflight", ingest.DefaultMaxInflight, "requests processed at once; beyond it the gateway answers 503 with Retry-After")
		produceTimeout  = flag.Duration("ingest.produceTimeout", ingest.DefaultProduceTimeout, "how long a request waits for broker acknowledgements before answering 503")
		linger          = flag.Duration("ingest.linger", ingest.DefaultLinger, "producer batching delay; higher is kinder to the broker, lower answers faster")
		dedupeCapacity  = flag.Int("ingest.dedupeCapacity", ingest.DefaultDedupeCapacity, "recently accepted dedupe identities remembered to answer retried lines 'duplicate'; more costs memory")
		replication     = flag.Int("ingest.replication", -1, "replication factor of topics created at start; -1 takes the broker default")
		shutdownTimeout = flag.Duration("ingest.shutdownTimeout", 30*time.Second, "on SIGTERM, how long to finish in-flight requests and flush the producer")
		logLevel        = flag.String("log.level", config.Env("DRIFTLINE_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	)
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "-log.level: %v\n", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)

	if err := run(common, ingest.Options{
		Environment:    common.Environment,
		Brokers:        common.SeedBrokers(),
		Topics:         common.Topics,
		MaxBodyBytes:   *maxBody,
		MaxInflight:    *maxInflight,
		ProduceTimeout: *produceTimeout,
		Linger:         *linger,
		DedupeCapacity: *dedupeCapacity,
		Logger:         log,
	}, *keysFile, *addr, int16(*replication), *shutdownTimeout); err != nil {
		log.Error("ingest gateway stopped", "err", err)
		os.Exit(1)
	}
}

func run(common *config.Common, opts ingest.Options, keysFile, addr string, replication int16, shutdownTimeout time.Duration) error {
	if err := common.Validate(); err != nil {
		return err
	}
	keys, err := ingest.OpenKeyring(common.Environment, keysFile, config.DefaultLocalAPIKey)
	if err != nil {
		return err
	}
	opts.Keys = keys
	gw, err := ingest.New(opts)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if common.CreateTopics {
		ectx, cancel := context.WithTimeout(ctx, time.Minute)
		err := gw.EnsureTopics(ectx, int32(common.Partitions), replication)
		cancel()
		if err != nil {
			_ = gw.Close(context.Background())
			return err
		}
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = gw.Close(context.Background())
		return fmt.Errorf("listen on -ingest.addr: %w", err)
	}
	srv := &http.Server{
		Handler:           gw.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      opts.ProduceTimeout + time.Minute,
		IdleTimeout:       2 * time.Minute,
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	slog.Info("ingest listening", "addr", ln.Addr().String(), "policy_rev", gw.PolicyRev())

	select {
	case <-ctx.Done():
		slog.Info("shutting down: no new requests, finishing in-flight ones")
	case err := <-serveErr:
		_ = gw.Close(context.Background())
		return fmt.Errorf("serve: %w", err)
	}

	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	var errs []error
	if err := srv.Shutdown(sctx); err != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
	}
	if err := gw.Close(sctx); err != nil {
		errs = append(errs, err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("serve: %w", err))
	}
	return errors.Join(errs...)
}
