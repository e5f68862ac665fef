package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRunBoundsOnlyTheWait checks that -migrate.timeout bounds the wait
// for ClickHouse and not the migration after it, which runs under the
// command's own context (ended by a signal) however long the wait took;
// and that a failed wait migrates nothing.
func TestRunBoundsOnlyTheWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waitDeadline bool
	var migrateCtx context.Context
	err := run(ctx, time.Hour,
		func(ctx context.Context) error {
			_, waitDeadline = ctx.Deadline()
			return nil
		},
		func(ctx context.Context) error {
			migrateCtx = ctx
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if !waitDeadline {
		t.Error("the wait ran without the timeout's deadline")
	}
	if migrateCtx == nil {
		t.Fatal("nothing migrated after the wait")
	}
	if d, ok := migrateCtx.Deadline(); ok {
		t.Errorf("the migration runs under a deadline (%s): the timeout is the wait's only", time.Until(d).Round(time.Second))
	}
	if migrateCtx.Err() != nil {
		t.Errorf("the migration's context ended once the wait returned: %v", migrateCtx.Err())
	}
	cancel()
	if migrateCtx.Err() == nil {
		t.Error("the migration's context outlives the command's (a signal would not stop it)")
	}

	refused := errors.New("connection refused")
	migrated := false
	err = run(context.Background(), time.Millisecond,
		func(ctx context.Context) error { <-ctx.Done(); return refused },
		func(context.Context) error { migrated = true; return nil })
	if !errors.Is(err, refused) || migrated || !strings.Contains(err.Error(), "-migrate.timeout (1ms") {
		t.Errorf("a failed wait: %v, migrated %t; want the wait's error, naming the timeout, and no migration", err, migrated)
	}
}
