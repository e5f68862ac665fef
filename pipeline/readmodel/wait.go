package readmodel

import (
	"context"
	"log/slog"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/stream/retry"
	chschema "github.com/driftline/driftline/schema/clickhouse"
)

// waitBackoff spaces the attempts of OpenWait: a server starting up is
// found within a second or two, one that is down is not asked more than
// twice a minute.
var waitBackoff = retry.Backoff{First: time.Second, Max: 30 * time.Second}

// openAttempt bounds one attempt of OpenWait.
const openAttempt = 15 * time.Second

// OpenWait is Open for a process that has work to do without ClickHouse
// (the rater rates while its billing reconciler waits): it retries Open
// until it succeeds or ctx ends, logging each failure with the hint (what
// goes on meanwhile, and how to do without), and returns ctx's error when
// ctx ended first.
func OpenWait(ctx context.Context, cfg service.ClickHouse, log *slog.Logger, hint string, opts ...Opt) (driver.Conn, error) {
	var conn driver.Conn
	err := retry.Do(ctx.Done(), waitBackoff, func() error {
		actx, cancel := context.WithTimeout(ctx, openAttempt)
		defer cancel()
		var err error
		conn, err = Open(actx, cfg, opts...)
		return err
	}, func(err error, wait time.Duration) {
		if ctx.Err() == nil {
			log.Warn("ClickHouse not reachable; retrying ("+hint+")", "addr", cfg.Addr, "err", err, "backoff", wait)
		}
	})
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return conn, err
}

// WaitMigrated waits until every migration of chschema.Migrations is
// recorded as applied in conn's database, polling every interval, for a
// process that must not migrate (the read-only query service: whoever
// writes the read model migrates it). It logs while it waits and returns
// ctx's error when ctx ends first.
func WaitMigrated(ctx context.Context, conn driver.Conn, log *slog.Logger, interval time.Duration) error {
	ms, err := loadMigrations(chschema.Migrations)
	if err != nil {
		return err
	}
	for logged := false; ; {
		applied, err := appliedMigrations(ctx, conn)
		missing := 0
		for _, m := range ms {
			if sum, ok := applied[m.version]; !ok || sum != m.checksum {
				missing++
			}
		}
		if err == nil && missing == 0 {
			return nil
		}
		if !logged {
			log.Warn("read model schema not migrated yet; waiting for the writers (joiner, rater or the stack) to apply it",
				"missing", missing, "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
