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
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/access"
	"github.com/driftline/driftline/pipeline/api/alert"
	"github.com/driftline/driftline/pipeline/api/cli"
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
	cl, cfg := service.NewCommandLine("query"), api.DefaultConfig()
	cfg.RegisterFlags(cl.FlagSet)
	cl.Parse()
	common := cl.Common
	if cl.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: query only serves; the client subcommands (drift, heatmap, attention, billing, automation, node) are driftctl's", cl.Arg(0))
	}
	if err := cfg.Prepare(common); err != nil {
		return err
	}
	guard, kr, err := cfg.OpenGuard()
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
	if acfg, ok := cfg.AuditClickHouse(common.ClickHouse); ok {
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

	closeKafka, err := cfg.ConnectKafka(common)
	defer closeKafka()
	if err != nil {
		return err
	}
	opts := cfg.Options
	opts.DB, opts.Guard, opts.Auditor, opts.Registry, opts.Actions = conn, guard, auditor, registry, reader.NewActionLog(auditConn)
	srv, err := api.New(opts)
	if err != nil {
		return err
	}

	if cfg.KeysFile != "" {
		hup, stopHup := service.Hangup()
		defer stopHup()
		go guard.Watch(ctx, cfg.KeysFile, cfg.KeysReloadInterval, hup)
	}
	if len(cfg.Alert.Webhooks) > 0 {
		snd, err := alert.New(cfg.AlertOptions(), reader.New(conn, reader.Options{}), reader.NewAlertLog(auditConn))
		if err != nil {
			return err
		}
		go func() { _ = snd.Run(ctx) }()
		slog.Info("alerts", "webhooks", len(cfg.Alert.Webhooks), "interval", cfg.Alert.Interval)
	}

	scheme := "http"
	if cfg.Serve.TLS != nil {
		scheme = "https"
	}
	slog.Info("query api listening", "addr", cfg.Serve.Addr, "ui", scheme+"://"+cfg.Serve.Addr+"/ui/", "clickhouse", common.ClickHouse.Addr, "database", common.ClickHouse.Database,
		"environment", common.Environment, "policy_rev", guard.PolicyRev(), "mtls", cfg.ClientCA != "", "local_key_admin", kr.Builtin())
	return srv.Serve(ctx, cfg.Serve)
}
