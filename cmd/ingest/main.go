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
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
	"github.com/driftline/driftline/pipeline/ingest"
	"github.com/driftline/driftline/pipeline/service"
)

func main() {
	cl := service.NewCommandLine("ingest")
	opts, serveOpts := ingest.DefaultOptions(), ingest.DefaultServeOptions()
	f := runFlags{}
	cl.StringVar(&f.addr, "ingest.addr", service.Env("DRIFTLINE_INGEST_ADDR", service.DefaultIngestAddr), "HTTP listen address of the gateway (/v1/events, /healthz, /metrics)")
	cl.StringVar(&f.keysFile, "ingest.keysFile", service.Env("DRIFTLINE_INGEST_KEYS_FILE", ""), "JSON identity file: API key digests and client certificate identities, each with its actor and permissions; required outside local_parity, where empty admits only the built-in local key")
	cl.DurationVar(&f.keysReload, "ingest.keysReloadInterval", ingest.DefaultKeysReloadInterval, "how often the keys file is checked for changes (SIGHUP reloads at once); a change starts a new policy_rev. 0 reloads on SIGHUP only")
	cl.StringVar(&f.tlsCert, "ingest.tlsCert", service.Env("DRIFTLINE_INGEST_TLS_CERT", ""), "PEM certificate of the gateway; with -ingest.tlsKey serves HTTPS")
	cl.StringVar(&f.tlsKey, "ingest.tlsKey", service.Env("DRIFTLINE_INGEST_TLS_KEY", ""), "PEM private key of -ingest.tlsCert")
	cl.StringVar(&f.clientCA, "ingest.clientCA", service.Env("DRIFTLINE_INGEST_CLIENT_CA", ""), "PEM CA bundle for client certificates: turns on mTLS, where the verified certificate (mapped by the keys file's \"clients\") is the caller's identity and API keys are not accepted. Required in prod")
	cl.Int64Var(&opts.MaxBodyBytes, "ingest.maxBodyBytes", opts.MaxBodyBytes, "largest request body; larger answers 413")
	cl.IntVar(&opts.MaxInflight, "ingest.maxInflight", opts.MaxInflight, "requests processed at once; beyond it the gateway answers 503 with Retry-After")
	cl.Int64Var(&opts.MaxInflightBytes, "ingest.maxInflightBytes", opts.MaxInflightBytes, "request body bytes held at once (the gateway's memory bound); beyond it the gateway answers 503 with Retry-After. Must be at least -ingest.maxBodyBytes")
	cl.IntVar(&opts.MaxLines, "ingest.maxLines", opts.MaxLines, "lines per request; more answers 413")
	cl.DurationVar(&opts.ProduceTimeout, "ingest.produceTimeout", opts.ProduceTimeout, "how long a request waits for broker acknowledgements before answering 503")
	cl.DurationVar(&opts.Linger, "ingest.linger", opts.Linger, "producer batching delay; higher is kinder to the broker, lower answers faster")
	cl.IntVar(&opts.DedupeCapacity, "ingest.dedupeCapacity", opts.DedupeCapacity, "recently accepted dedupe identities remembered to answer retried lines 'duplicate'; more costs memory")
	cl.DurationVar(&opts.MaxClockSkew, "ingest.maxClockSkew", opts.MaxClockSkew, "how far ahead of the gateway's clock an event's occurred_at may be; later events are rejected with reason clock_skew and quarantined. Larger admits producers with worse clocks, smaller rejects producers running slightly ahead")
	cl.DurationVar(&serveOpts.ShutdownTimeout, "ingest.shutdownTimeout", serveOpts.ShutdownTimeout, "on SIGTERM, how long to finish admitted requests and flush the producer; keep it above -ingest.produceTimeout")
	log := cl.Parse()
	common := cl.Common
	opts.Environment = common.Environment
	opts.Brokers = common.SeedBrokers()
	opts.Topics = common.Topics
	opts.ClientCertAuth = f.clientCA != ""
	opts.Logger = log
	if err := run(common, opts, serveOpts, f); err != nil {
		log.Error("ingest gateway stopped", "err", err)
		os.Exit(1)
	}
}

// runFlags are the command's settings that are no gateway option.
type runFlags struct {
	keysFile, addr, tlsCert, tlsKey, clientCA string
	keysReload                                time.Duration
}

func run(common *service.Common, opts ingest.Options, serveOpts ingest.ServeOptions, f runFlags) error {
	if err := common.Validate(); err != nil {
		return err
	}
	if common.Environment == contract.EnvProd && f.clientCA == "" {
		return ingest.ErrProdWithoutMTLS
	}
	var tlsCfg *tls.Config
	if f.tlsCert != "" || f.tlsKey != "" || f.clientCA != "" {
		var err error
		if tlsCfg, err = service.ServerTLSConfig(f.tlsCert, f.tlsKey, f.clientCA); err != nil {
			return fmt.Errorf("-ingest.tlsCert/-ingest.tlsKey/-ingest.clientCA: %w", err)
		}
	}
	kr, err := keys.OpenKeyring(common.Environment, f.keysFile, service.DefaultLocalAPIKey)
	if err != nil {
		return err
	}
	opts.Keys = kr
	opts.KafkaOpts = append(opts.KafkaOpts, common.KafkaOpts()...)
	gw, err := ingest.New(opts)
	if err != nil {
		return err
	}
	ctx, stop := service.SignalContext()
	defer stop()

	if common.CreateTopics {
		ectx, cancel := context.WithTimeout(ctx, time.Minute)
		err := gw.EnsureTopics(ectx, int32(common.Partitions), common.Kafka.Replication())
		cancel()
		if err != nil {
			_ = gw.Close(context.Background())
			return err
		}
	}
	if f.keysFile != "" {
		hup, stopHup := service.Hangup()
		defer stopHup()
		go gw.WatchKeys(ctx, f.keysFile, f.keysReload, hup)
	}

	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		_ = gw.Close(context.Background())
		return fmt.Errorf("listen on -ingest.addr: %w", err)
	}
	serveOpts.TLS = tlsCfg
	serveOpts.OnListening = func(a net.Addr) {
		slog.Info("ingest listening", "addr", a.String(), "tls", tlsCfg != nil, "mtls", opts.ClientCertAuth, "policy_rev", gw.PolicyRev())
	}
	return gw.Serve(ctx, ln, serveOpts)
}
