package reconcile

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// RunOnClickHouse runs a reconciler with opts that writes to the
// ClickHouse connect returns, until ctx ends. connect may wait for the
// server (a rater rates meanwhile); when ctx ends before it succeeds,
// RunOnClickHouse returns nil, for nothing failed.
func RunOnClickHouse(ctx context.Context, opts Options, connect func(context.Context) (driver.Conn, error)) error {
	conn, err := connect(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer conn.Close()
	rec, err := New(ctx, opts, NewClickHouse(conn))
	if err != nil {
		return err
	}
	rec.opts.Logger.Info("billing reconciler started", "group", opts.Group)
	return rec.Run(ctx)
}
