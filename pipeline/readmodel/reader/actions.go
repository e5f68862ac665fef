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
	"github.com/driftline/driftline/pipeline/readmodel"
)

// AcceptedCommand is the query service's answer to an accepted action (or
// batch of actions), kept by its Idempotency-Key in action_commands.
type AcceptedCommand struct {
	IdempotencyKey string
	RequestHash    string // SHA-256 of the canonical request, in the format the API stored it in
	CommandID      string
	EvidenceID     string // "" for a batch
	Action         string
	ActorID        string
	Answer         string // the JSON answer, sent again to a re-post
	AcceptedAt     time.Time
}

// ActionLog keeps the answers to accepted actions in ClickHouse, where
// every query replica, and a restarted one, finds them.
//
// Answers accepted at the same time share one INSERT (group commit): an
// Accept waits for the INSERT that holds its row, and the answers that
// arrive while one INSERT runs go together in the next. One INSERT per
// action made one part per action, and at thousands of actions a minute
// ClickHouse 18.16 spent its time merging them.
type ActionLog struct {
	conn  driver.Conn
	group *readmodel.GroupCommit[AcceptedCommand]
}

// maxAcceptBatch bounds the rows of one INSERT of the action log.
const maxAcceptBatch = 1000

// acceptTimeout bounds one INSERT of the action log; it is not the
// request's context, which may end while other requests' rows share the
// INSERT.
const acceptTimeout = 30 * time.Second

// NewActionLog returns the action log over conn, whose database holds the
// read model.
func NewActionLog(conn driver.Conn) *ActionLog {
	l := &ActionLog{conn: conn}
	l.group = readmodel.NewGroupCommit(maxAcceptBatch, l.insert)
	return l
}

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

// Accept records c, and returns once the INSERT that holds it ended. A
// key recorded twice (two replicas racing) keeps the first answer: the
// version falls as accepted_at grows.
// If ctx ends first the row is still written; the request no longer
// waits for it.
func (l *ActionLog) Accept(ctx context.Context, c AcceptedCommand) error {
	if err := l.group.Submit(ctx, c); err != nil {
		return fmt.Errorf("record action: %w", err)
	}
	return nil
}

func (l *ActionLog) insert(batch []AcceptedCommand) error {
	ctx, cancel := context.WithTimeout(context.Background(), acceptTimeout)
	defer cancel()
	b, err := l.conn.PrepareBatch(ctx, `INSERT INTO action_commands (idempotency_key, request_hash, command_id,
	evidence_id, action, actor_id, answer, accepted_at, version)`)
	if err != nil {
		return err
	}
	for _, c := range batch {
		version := uint64(math.MaxInt64 - c.AcceptedAt.UnixNano())
		if err := b.Append(c.IdempotencyKey, c.RequestHash, c.CommandID, c.EvidenceID, c.Action, c.ActorID, c.Answer,
			c.AcceptedAt.UTC(), version); err != nil {
			_ = b.Abort()
			return err
		}
	}
	return b.Send()
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
