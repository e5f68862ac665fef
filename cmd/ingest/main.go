// Command ingest runs the HTTP ingest gateway: POST /v1/events takes NDJSON
// envelopes authenticated by API key and writes them to Kafka (see package
// pipeline/ingest).
//
// Besides the shared flags (pipeline/service), it reads:
//
//	DRIFTLINE_INGEST_ADDR       listen address (-ingest.addr)
//	DRIFTLINE_INGEST_KEYS_FILE  identity file: API keys and client certificates (-ingest.keysFile)
//	DRIFTLINE_INGEST_TLS_CERT   server certificate (-ingest.tlsCert)
//	DRIFTLINE_INGEST_TLS_KEY    its key (-ingest.tlsKey)
//	DRIFTLINE_INGEST_CLIENT_CA  client CA: turns on mTLS (-ingest.clientCA)
//
// Authentication follows the environment profile: local_parity takes API
// keys (and the built-in local key without a keys file); dev takes API keys
// or, with -ingest.clientCA, client certificates; prod refuses to start
// without -ingest.clientCA. SIGHUP (or a change of the keys file) reloads
// the keys under a new policy_rev; SIGTERM drains: new requests are
// refused, admitted ones finish and are answered, the producer flushes.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/ingest"
	"github.com/driftline/driftline/pipeline/service"
)

func main() {
	common := service.RegisterFlags(flag.CommandLine)
	var (
		addr             = flag.String("ingest.addr", service.Env("DRIFTLINE_INGEST_ADDR", service.DefaultIngestAddr), "HTTP listen address of the gateway (/v1/events, /healthz, /metrics)")
		keysFile         = flag.String("ingest.keysFile", service.Env("DRIFTLINE_INGEST_KEYS_FILE", ""), "JSON identity file: API key digests and client certificate identities, each with its actor and permissions; required outside local_parity, where empty admits only the built-in local key")
		keysReload       = flag.Duration("ingest.keysReloadInterval", 5*time.Second, "how often the keys file is checked for changes (SIGHUP reloads at once); a change starts a new policy_rev. 0 reloads on SIGHUP only")
		tlsCert          = flag.String("ingest.tlsCert", service.Env("DRIFTLINE_INGEST_TLS_CERT", ""), "PEM certificate of the gateway; with -ingest.tlsKey serves HTTPS")
		tlsKey           = flag.String("ingest.tlsKey", service.Env("DRIFTLINE_INGEST_TLS_KEY", ""), "PEM private key of -ingest.tlsCert")
		clientCA         = flag.String("ingest.clientCA", service.Env("DRIFTLINE_INGEST_CLIENT_CA", ""), "PEM CA bundle for client certificates: turns on mTLS, where the verified certificate (mapped by the keys file's \"clients\") is the caller's identity and API keys are not accepted. Required in prod")
		maxBody          = flag.Int64("ingest.maxBodyBytes", ingest.DefaultMaxBodyBytes, "largest request body; larger answers 413")
		maxInflight      = flag.Int("ingest.maxInflight", ingest.DefaultMaxInflight, "requests processed at once; beyond it the gateway answers 503 with Retry-After")
		maxInflightBytes = flag.Int64("ingest.maxInflightBytes", ingest.DefaultMaxInflightBytes, "request body bytes held at once (the gateway's memory bound); beyond it the gateway answers 503 with Retry-After. Must be at least -ingest.maxBodyBytes")
		maxLines         = flag.Int("ingest.maxLines", ingest.DefaultMaxLines, "lines per request; more answers 413")
		produceTimeout   = flag.Duration("ingest.produceTimeout", ingest.DefaultProduceTimeout, "how long a request waits for broker acknowledgements before answering 503")
		linger           = flag.Duration("ingest.linger", ingest.DefaultLinger, "producer batching delay; higher is kinder to the broker, lower answers faster")
		dedupeCapacity   = flag.Int("ingest.dedupeCapacity", ingest.DefaultDedupeCapacity, "recently accepted dedupe identities remembered to answer retried lines 'duplicate'; more costs memory")
		replication      = flag.Int("ingest.replication", -1, "replication factor of topics created at start; -1 takes the broker default")
		shutdownTimeout  = flag.Duration("ingest.shutdownTimeout", 30*time.Second, "on SIGTERM, how long to finish admitted requests and flush the producer; keep it above -ingest.produceTimeout")
		logLevel         = flag.String("log.level", service.Env("DRIFTLINE_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
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
		Environment:      common.Environment,
		Brokers:          common.SeedBrokers(),
		Topics:           common.Topics,
		ClientCertAuth:   *clientCA != "",
		MaxBodyBytes:     *maxBody,
		MaxInflight:      *maxInflight,
		MaxInflightBytes: *maxInflightBytes,
		MaxLines:         *maxLines,
		ProduceTimeout:   *produceTimeout,
		Linger:           *linger,
		DedupeCapacity:   *dedupeCapacity,
		Logger:           log,
	}, runFlags{
		keysFile: *keysFile, keysReload: *keysReload, addr: *addr,
		tlsCert: *tlsCert, tlsKey: *tlsKey, clientCA: *clientCA,
		replication: int16(*replication), shutdownTimeout: *shutdownTimeout,
	}); err != nil {
		log.Error("ingest gateway stopped", "err", err)
		os.Exit(1)
	}
}

type runFlags struct {
	keysFile, addr, tlsCert, tlsKey, clientCA string
	keysReload, shutdownTimeout               time.Duration
	replication                               int16
}

func run(common *service.Common, opts ingest.Options, f runFlags) error {
	if err := common.Validate(); err != nil {
		return err
	}
	if common.Environment == contract.EnvProd && f.clientCA == "" {
		return ingest.ErrProdWithoutMTLS
	}
	var tlsCfg *tls.Config
	if f.tlsCert != "" || f.tlsKey != "" || f.clientCA != "" {
		var err error
		if tlsCfg, err = ingest.ServerTLSConfig(f.tlsCert, f.tlsKey, f.clientCA); err != nil {
			return fmt.Errorf("-ingest.tlsCert/-ingest.tlsKey/-ingest.clientCA: %w", err)
		}
	}
	keys, err := ingest.OpenKeyring(common.Environment, f.keysFile, service.DefaultLocalAPIKey)
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
		err := gw.EnsureTopics(ectx, int32(common.Partitions), f.replication)
		cancel()
		if err != nil {
			_ = gw.Close(context.Background())
			return err
		}
	}
	if f.keysFile != "" {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go gw.WatchKeys(ctx, f.keysFile, f.keysReload, hup)
	}

	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		_ = gw.Close(context.Background())
		return fmt.Errorf("listen on -ingest.addr: %w", err)
	}
	return gw.Serve(ctx, ln, ingest.ServeOptions{
		TLS:             tlsCfg,
		ShutdownTimeout: f.shutdownTimeout,
		OnListening: func(a net.Addr) {
			slog.Info("ingest listening", "addr", a.String(), "tls", tlsCfg != nil, "mtls", opts.ClientCertAuth, "policy_rev", gw.PolicyRev())
		},
	})
}
