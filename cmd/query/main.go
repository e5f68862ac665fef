// Command query serves the query API and web UI over the ClickHouse read
// model (CONTRACT section 7) and accepts operator actions as commands on
// the commands topic (section 9.2); see package pipeline/api for
// the endpoints and cmd/driftctl for reading it from a shell.
//
// Every request but /healthz and the UI's files needs Authorization:
// Bearer <key>, looked up in -query.keysFile (the ingest gateway's
// format, with roles; docs/access.md). The file is required in dev and
// prod; local_parity without one admits the local key as admin. prod also
// requires mTLS (-query.tlsCert, -query.tlsKey, -query.clientCA). SIGHUP
// (or a change of the file) reloads the keys. The service reads as a
// read-only ClickHouse user and writes only audit_log and the logs of
// actions and alerts, as -query.auditUser; it creates nothing and waits for the schema.
//
//	query -query.addr 127.0.0.1:18081 -clickhouse.addr 127.0.0.1:19000
//	query act retry <evidence_id> reason=redeploy   (as driftctl act)
package main

import (
	"context"
	"crypto/tls"
	"errors"
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

	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/access"
	"github.com/driftline/driftline/pipeline/api/alert"
	"github.com/driftline/driftline/pipeline/api/cli"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
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
	cl := service.NewCommandLine("query")
	addr := cl.String("query.addr", service.Env("DRIFTLINE_QUERY_ADDR", service.DefaultQueryAddr), "HTTP listen address of the query API (env DRIFTLINE_QUERY_ADDR)")
	joinerGroup := cl.String("query.joinerGroup", api.DefaultJoinerGroup, "consumer group of the joiner, whose lag /v1/status reports; empty reports no lag")
	queryTimeout := cl.Duration("query.timeout", 10*time.Second, "bound on the ClickHouse work of one request; raise it for very large listings")
	lagTimeout := cl.Duration("query.lagTimeout", 3*time.Second, "bound on asking the broker for lag; past it /v1/status reports the lag unknown instead of waiting")
	maxWait := cl.Duration("query.maxWait", 30*time.Second, "upper bound on a request's wait_timeout (read-your-writes); longer waits hold connections open")
	waitPartitions := cl.Int("query.joinerPartitions", 1, "partitions the joiner reports in consumer_progress; wait_watermark waits for at least this many, so set it to the topics' partition count")
	var webhooks []string
	cl.Func("alert.webhook", "Alertmanager v2 URL (http://host:9093/api/v2/alerts) to push alerts to (CONTRACT 9.3); repeat for several receivers; none sends no alerts", func(v string) error {
		webhooks = append(webhooks, v)
		return nil
	})
	alertInterval := cl.Duration("alert.interval", 15*time.Second, "how often alert conditions are read; shorter alerts sooner, each round reads drift_evidence with FINAL")
	alertLagSLO := cl.Int64("alert.lagSLO", 100000, "consumer lag (records) of the joiner group above which an alert fires")
	eventsTimeout := cl.Duration("query.eventsTimeout", 2*time.Second, "bound on reading a node page's recent events from Kafka; past it they show as unavailable and the page is still served")
	shutdownTimeout := cl.Duration("query.shutdownTimeout", 10*time.Second, "how long in-flight requests may finish after SIGTERM before they are cut")
	keysFile := cl.String("query.keysFile", service.Env("DRIFTLINE_QUERY_KEYS_FILE", ""), "keys file (the ingest gateway's format; entries with roles, tenant_ids, authority_levels; env DRIFTLINE_QUERY_KEYS_FILE): required in dev and prod; empty in local_parity admits only the built-in local key, as admin")
	keysReload := cl.Duration("query.keysReloadInterval", 5*time.Second, "how often the keys file is checked for changes (SIGHUP reloads at once); a change starts a new policy_rev. 0 reloads on SIGHUP only")
	tlsCert := cl.String("query.tlsCert", service.Env("DRIFTLINE_QUERY_TLS_CERT", ""), "PEM certificate of the query API; with -query.tlsKey serves HTTPS")
	tlsKey := cl.String("query.tlsKey", service.Env("DRIFTLINE_QUERY_TLS_KEY", ""), "PEM private key of -query.tlsCert")
	clientCA := cl.String("query.clientCA", service.Env("DRIFTLINE_QUERY_CLIENT_CA", ""), "PEM CA bundle for client certificates: turns on mTLS (every connection must present a certificate it signed; the bearer key still decides the roles). Required in prod")
	maxConcurrent := cl.Int("query.maxConcurrent", 64, "requests served at once; beyond it the API answers 503 with Retry-After at once instead of queueing on ClickHouse")
	maxExportRows := cl.Int("query.maxExportRows", 1_000_000, "rows of an Arrow or CSV export that gives no limit; a larger selection is cut there (header Driftline-Export-Row-Cap). More costs ClickHouse and network time per export")
	allowOrigins := cl.String("query.allowOrigins", service.Env("DRIFTLINE_QUERY_ALLOW_ORIGINS", ""), "comma-separated origins whose web pages may call the API (CORS); empty: none but the UI this server serves")
	writeTimeout := cl.Duration("query.writeTimeout", 5*time.Minute, "bound on writing one answer, exports included; lower frees connections held by slow readers sooner, but cuts large exports")
	idleTimeout := cl.Duration("query.idleTimeout", 2*time.Minute, "how long an idle keep-alive connection is kept")
	auditUser := cl.String("query.auditUser", service.Env("DRIFTLINE_QUERY_AUDIT_USER", ""), "ClickHouse user that appends to audit_log and to the action and alert logs (action_commands, alert_deliveries) (env DRIFTLINE_QUERY_AUDIT_USER); empty: -clickhouse.user. With a read-only -clickhouse.user it must be another user")
	auditPassword := cl.String("query.auditPassword", service.Env("DRIFTLINE_QUERY_AUDIT_PASSWORD", ""), "password of -query.auditUser (env DRIFTLINE_QUERY_AUDIT_PASSWORD)")
	cl.Parse()
	common := cl.Common
	if cl.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: query only serves; the client subcommands (drift, heatmap, attention, billing, automation, node) are driftctl's", cl.Arg(0))
	}
	if !contract.ValidEnvironment(common.Environment) {
		return fmt.Errorf("-env %q: must be local_parity, dev or prod", common.Environment)
	}
	if err := common.Kafka.Validate(); err != nil {
		return err
	}
	if common.Environment == contract.EnvProd && *clientCA == "" {
		return access.ErrProdWithoutMTLS
	}
	var tlsCfg *tls.Config
	if *tlsCert != "" || *tlsKey != "" || *clientCA != "" {
		var err error
		if tlsCfg, err = service.ServerTLSConfig(*tlsCert, *tlsKey, *clientCA); err != nil {
			return fmt.Errorf("-query.tlsCert/-query.tlsKey/-query.clientCA: %w", err)
		}
	}
	kr, err := keys.OpenKeyring(common.Environment, *keysFile, service.DefaultLocalAPIKey)
	if err != nil {
		return err
	}
	guard, err := access.NewGuard(access.GuardOptions{Environment: common.Environment, LocalKey: service.DefaultLocalAPIKey,
		MTLS: *clientCA != ""}, kr)
	if err != nil {
		return err
	}

	ctx, stop := service.SignalContext()
	defer stop()

	// The query service creates nothing: the writers own the schema. It
	// waits for the database and then for every migration.
	conn, err := readmodel.OpenWait(ctx, common.ClickHouse, slog.Default(),
		"the query service waits for the read model's database; whoever migrates it creates it", readmodel.NoCreate())
	if err != nil {
		return fmt.Errorf("open clickhouse %s: %w", common.ClickHouse.Addr, err)
	}
	defer conn.Close()
	if err := readmodel.WaitMigrated(ctx, conn, slog.Default(), time.Second); err != nil {
		return err
	}
	auditConn := conn
	if *auditUser != "" && *auditUser != common.ClickHouse.User {
		acfg := common.ClickHouse
		acfg.User, acfg.Password = *auditUser, *auditPassword
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		auditConn, err = readmodel.Open(actx, acfg, readmodel.NoCreate())
		cancel()
		if err != nil {
			return fmt.Errorf("open clickhouse %s as the audit user: %w", common.ClickHouse.Addr, err)
		}
		defer auditConn.Close()
	}
	registry := service.NewRegistry()
	auditor, err := access.NewAuditor(access.NewClickHouseSink(auditConn), access.AuditorOptions{Registry: registry})
	if err != nil {
		return err
	}
	defer auditor.Close()

	opts := api.Options{DB: conn, QueryTimeout: *queryTimeout, LagTimeout: *lagTimeout, MaxWait: *maxWait, WaitPartitions: *waitPartitions,
		Guard: guard, Auditor: auditor, Registry: registry, MaxConcurrent: *maxConcurrent, MaxExportRows: *maxExportRows,
		Topics: common.Topics, Environment: common.Environment, Actions: reader.NewActionLog(auditConn)}
	for _, o := range strings.Split(*allowOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			opts.AllowOrigins = append(opts.AllowOrigins, o)
		}
	}
	if *joinerGroup != "" {
		opts.WaitConsumer = *joinerGroup
	}
	// The broker is optional for a read-only API: without one, or without a
	// group to watch, the status reports lag as not configured.
	if brokers := common.SeedBrokers(); len(brokers) > 0 && *joinerGroup != "" {
		kcl, err := common.KafkaClient()
		if err != nil {
			return err
		}
		defer kcl.Close()
		opts.Lag = kadm.NewClient(kcl)
		opts.LagGroups = []string{*joinerGroup}
	}
	// Operator actions are commands on the commands topic (acks=all, the
	// murmur2 partitioner, keyed by the finding's identity); without a
	// broker the action endpoints answer 503.
	if len(common.SeedBrokers()) > 0 {
		ccl, err := common.KafkaClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
		if err != nil {
			return err
		}
		defer ccl.Close()
		opts.Commands = ccl
		// The node page reads its recent events by coordinate through the
		// same client (one Fetch per record, no consumer group).
		opts.Events = api.NewKafkaEvents(ccl, *eventsTimeout)
	}
	srv, err := api.New(opts)
	if err != nil {
		return err
	}

	if *keysFile != "" {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go guard.Watch(ctx, *keysFile, *keysReload, hup)
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
		snd, err := alert.New(aopts, reader.New(conn, reader.Options{}), reader.NewAlertLog(auditConn))
		if err != nil {
			return err
		}
		go func() { _ = snd.Run(ctx) }()
		slog.Info("alerts", "webhooks", len(webhooks), "interval", *alertInterval)
	}

	// Write and idle timeouts bound what a slow or idle client holds; the
	// write timeout is above the longest wait and query a request may make.
	wt := max(*writeTimeout, *maxWait+*queryTimeout+10*time.Second)
	hs := &http.Server{Addr: *addr, Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: wt, IdleTimeout: *idleTimeout, TLSConfig: tlsCfg, MaxHeaderBytes: 64 << 10}
	errc := make(chan error, 1)
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
		go func() { errc <- hs.ListenAndServeTLS("", "") }()
	} else {
		go func() { errc <- hs.ListenAndServe() }()
	}
	slog.Info("query api listening", "addr", *addr, "ui", scheme+"://"+*addr+"/ui/", "clickhouse", common.ClickHouse.Addr, "database", common.ClickHouse.Database,
		"environment", common.Environment, "policy_rev", guard.PolicyRev(), "mtls", *clientCA != "", "local_key_admin", kr.Builtin())

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
	srv.Close()
	return nil
}
