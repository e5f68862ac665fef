package reader

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/contract"
)

// AcceptedCommand is the query service's answer to an accepted action (or
// batch of actions), kept by its Idempotency-Key in action_commands.
type AcceptedCommand struct {
	IdempotencyKey string
	RequestHash    string // SHA-256 of the canonical request
	CommandID      string
	EvidenceID     string // "" for a batch
	Action         string
	ActorID        string
	Answer         string // the JSON answer, sent again to a re-post
	AcceptedAt     time.Time
}

// ActionLog keeps the answers to accepted actions in ClickHouse, where
// every query replica, and a restarted one, finds them.
type ActionLog struct {
	conn driver.Conn
}

// NewActionLog returns the action log over conn, whose database holds the
// read model.
func NewActionLog(conn driver.Conn) *ActionLog { return &ActionLog{conn: conn} }

// codeLogicalError is the error ClickHouse 18.16 answers, now and then,
// to a read racing the insert of a new part of a small table ("Could not
// find a column of minimum size in MergeTree"); the same read a moment
// later succeeds.
const codeLogicalError = 49

// Accepted returns the first answer recorded for key, and false if none.
// A read that meets ClickHouse 18.16's transient logical error is tried
// again, twice.
func (l *ActionLog) Accepted(ctx context.Context, key string) (c AcceptedCommand, ok bool, err error) {
	for try := 0; ; try++ {
		c, ok, err = l.accepted(ctx, key)
		var ex *clickhouse.Exception
		if err == nil || try == 2 || !errors.As(err, &ex) || ex.Code != codeLogicalError {
			return c, ok, err
		}
		select {
		case <-ctx.Done():
			return c, ok, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (l *ActionLog) accepted(ctx context.Context, key string) (AcceptedCommand, bool, error) {
	rows, err := l.conn.Query(ctx, `SELECT request_hash, command_id, evidence_id, action, actor_id, answer, accepted_at
	FROM action_commands WHERE idempotency_key = ? ORDER BY version DESC LIMIT 1`, key)
	if err != nil {
		return AcceptedCommand{}, false, fmt.Errorf("read action_commands: %w", err)
	}
	defer rows.Close()
	c := AcceptedCommand{IdempotencyKey: key}
	if !rows.Next() {
		return c, false, rows.Err()
	}
	if err := rows.Scan(&c.RequestHash, &c.CommandID, &c.EvidenceID, &c.Action, &c.ActorID, &c.Answer, &c.AcceptedAt); err != nil {
		return c, false, fmt.Errorf("read action_commands: %w", err)
	}
	c.AcceptedAt = c.AcceptedAt.UTC()
	return c, true, rows.Err()
}

// Accept records c. A key recorded twice (two replicas racing) keeps the
// first answer: the version falls as accepted_at grows.
func (l *ActionLog) Accept(ctx context.Context, c AcceptedCommand) error {
	b, err := l.conn.PrepareBatch(ctx, `INSERT INTO action_commands (idempotency_key, request_hash, command_id,
	evidence_id, action, actor_id, answer, accepted_at, version)`)
	if err != nil {
		return fmt.Errorf("record action: %w", err)
	}
	version := uint64(math.MaxInt64 - c.AcceptedAt.UnixNano())
	if err := b.Append(c.IdempotencyKey, c.RequestHash, c.CommandID, c.EvidenceID, c.Action, c.ActorID, c.Answer,
		c.AcceptedAt.UTC(), version); err != nil {
		return fmt.Errorf("record action: %w", err)
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("record action: %w", err)
	}
	return nil
}

// NodeQuarantined reports whether the latest quarantine_node or
// release_node action applied to one of the findings evidenceIDs (those of
// one node) was a quarantine.
func (rd *Reader) NodeQuarantined(ctx context.Context, evidenceIDs []string) (bool, error) {
	if len(evidenceIDs) == 0 {
		return false, nil
	}
	args := make([]any, 0, len(evidenceIDs)+2)
	for _, id := range evidenceIDs {
		args = append(args, id)
	}
	args = append(args, string(contract.ActionQuarantineNode), string(contract.ActionReleaseNode))
	last, err := list(ctx, rd, "node_quarantined", "SELECT action FROM drift_history FINAL WHERE "+
		inList("evidence_id", len(evidenceIDs))+" AND transition = '"+string(contract.TransitionAction)+
		"' AND action IN (?, ?) ORDER BY at DESC, version DESC LIMIT 1", args, nil,
		func(r driver.Rows) (string, error) {
			var a string
			err := r.Scan(&a)
			return a, err
		})
	if err != nil || len(last) == 0 {
		return false, err
	}
	return last[0] == string(contract.ActionQuarantineNode), nil
}
