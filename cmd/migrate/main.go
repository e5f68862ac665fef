// Command migrate applies the read model's ClickHouse migrations
// (schema/clickhouse) to the database of -clickhouse.db and exits: the
// one-shot step of a deployment before the writers start (the services
// do not migrate; the query service waits for the schema). With
// -clickhouse.cluster it migrates in cluster mode: replicated tables and
// Distributed tables in front, ON CLUSTER (docs/deploy.md). It retries
// connecting until -migrate.timeout, for a server still starting; a
// failing migration is not retried. The migration itself is not bounded
// by -migrate.timeout (one that copies a large table takes as long as the
// copy): it runs until it is done, or until SIGINT or SIGTERM.
//
//	migrate -clickhouse.addr ch-1:9000,ch-2:9000 -clickhouse.cluster driftline
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
)

func main() {
	cl := service.NewCommandLine("migrate")
	timeout := cl.Duration("migrate.timeout", 5*time.Minute, "how long to wait for ClickHouse to answer before giving up")
	cl.Parse()
	ctx, stop := service.SignalContext()
	defer stop()
	cfg := cl.Common.ClickHouse
	err := run(ctx, *timeout,
		func(ctx context.Context) error {
			conn, err := readmodel.OpenWait(ctx, cfg, slog.Default(), "the migration waits for ClickHouse")
			if err == nil {
				conn.Close()
			}
			return err
		},
		func(ctx context.Context) error { return readmodel.OpenMigrate(ctx, cfg) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		os.Exit(1)
	}
	slog.Info("read model migrated", "addr", cfg.Addr, "db", cfg.Database, "cluster", cfg.Cluster)
}

// run waits for ClickHouse with wait for at most timeout, then migrates
// with migrate under ctx alone.
func run(ctx context.Context, timeout time.Duration, wait, migrate func(context.Context) error) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := wait(wctx); err != nil {
		if ctx.Err() == nil && wctx.Err() != nil {
			return fmt.Errorf("ClickHouse did not answer within -migrate.timeout (%s; the warnings above say why): %w", timeout, err)
		}
		return err
	}
	cancel()
	return migrate(ctx)
}
