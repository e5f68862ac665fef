package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	chdriver "github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/access"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/api/cli"
	"github.com/driftline/driftline/pipeline/api/client"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/streamtest"
)

// actionsEnv is a broker, a read model, a joiner writing to it and the
// query API accepting actions, over one partition (so one watermark).
type actionsEnv struct {
	t     *testing.T
	env   *streamtest.Env
	url   string
	seq   uint64
	newAP func() string // another query replica over the same log
	// amnesiac is a replica that never finds an answer in the log: one
	// that died after writing a command and before recording its answer.
	amnesiac string
}

// forgetful is an action log that finds nothing.
type forgetful struct{ api.ActionLog }

func (forgetful) Accepted(context.Context, string) (reader.AcceptedCommand, bool, error) {
	return reader.AcceptedCommand{}, false, nil
}

var a0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func newActionsEnv(t *testing.T) *actionsEnv {
	env := streamtest.NewEnv(t, 1)
	producer := testenv.KafkaClient(t, env.Brokers, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	opts := joiner.Options{StageOptions: stream.StageOptions{Brokers: env.Brokers, Group: "actions-joiner", Topics: env.Names,
		Logger: slog.New(slog.DiscardHandler)}, RoundOptions: stream.RoundOptions{FlushInterval: 50 * time.Millisecond},
		Requests: producer, RequestTimeout: 2 * time.Minute}
	stop := streamtest.Start(t, "joiner", func(ctx context.Context) (*joiner.Joiner, error) {
		return joiner.New(ctx, opts, sink.NewClickHouse(env.CH))
	})
	t.Cleanup(stop)
	newServer := func(log api.ActionLog) string {
		return serveAPI(t, api.Options{DB: env.CH, Commands: producer, Actions: log, Topics: env.Names, Guard: testenv.LocalGuard(t)})
	}
	newAP := func() string { return newServer(reader.NewActionLog(env.CH)) }
	return &actionsEnv{t: t, env: env, url: newAP(), newAP: newAP, amnesiac: newServer(forgetful{reader.NewActionLog(env.CH)})}
}

func (e *actionsEnv) send(typ string, at time.Time, payload any) {
	e.t.Helper()
	e.seq++
	r := streamtest.Event(e.t, e.env.Names, typ, "fleet", e.seq, at, payload)
	if err := e.env.Client.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
}

func appRecord(id, state string) contract.PlatformRecord {
	return contract.PlatformRecord{RecordType: "app_instance", RecordID: "rec-" + id, RecordVersion: 1,
		ResourceFamily: contract.FamilyAppRuntime, ProductID: "apps", OwningDomain: "eu-west", DomainID: "d-eu",
		Provider: contract.ProviderAppRuntime, ProviderID: id, ExpectedState: state}
}

func appObservation(id, state string) contract.Observation {
	return contract.Observation{Provider: contract.ProviderAppRuntime, ProviderID: id, ResourceFamily: contract.FamilyAppRuntime,
		ObservedState: state}
}

// post sends an action and returns the status and body.
func (e *actionsEnv) post(base, path, key string, body any) (int, []byte, http.Header) {
	e.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+testenv.LocalKey)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp.Header
}

// refused checks that an action was refused with code and reason.
func (e *actionsEnv) refused(path, key string, body any, code int, reason contract.ActionReason) {
	e.t.Helper()
	got, b, _ := e.post(e.url, path, key, body)
	var eb apitypes.ErrorBody
	_ = json.Unmarshal(b, &eb)
	if got != code || eb.Reason != string(reason) {
		e.t.Errorf("POST %s %v: %d %s, want %d with reason %s", path, body, got, b, code, reason)
	}
}

func (e *actionsEnv) detail(id string) apitypes.DriftDetail {
	e.t.Helper()
	var d apitypes.DriftDetail
	if err := json.Unmarshal(testenv.GetJSON(e.t, e.url+"/v1/drift/"+id, http.StatusOK), &d); err != nil {
		e.t.Fatal(err)
	}
	return d
}

// waitFinding waits until the finding id satisfies ok.
func (e *actionsEnv) waitFinding(id string, what string, ok func(apitypes.DriftDetail) bool) apitypes.DriftDetail {
	e.t.Helper()
	var d apitypes.DriftDetail
	testenv.CheckFor(e.t, 30*time.Second, func() error {
		resp, err := testenv.Do(e.url+"/v1/drift/"+url.PathEscape(id), testenv.LocalKey)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", id, resp.Status)
		}
		d = apitypes.DriftDetail{}
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
			return err
		}
		if !ok(d) {
			return fmt.Errorf("%s: not yet %s: %+v", id, what, d.Finding)
		}
		return nil
	})
	return d
}

// counts returns the records of the commands and requests topics and the
// rows of action_commands.
func (e *actionsEnv) counts() (commands, requests int, rows uint64) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, topic := range []string{e.env.Names.Commands, e.env.Names.Requests} {
		n := len(readAll(e.t, ctx, e.env.Brokers, topic))
		if topic == e.env.Names.Commands {
			commands = n
		} else {
			requests = n
		}
	}
	if err := e.env.CH.QueryRow(ctx, "SELECT count() FROM action_commands").Scan(&rows); err != nil {
		e.t.Fatal(err)
	}
	return commands, requests, rows
}

// readAll reads every committed record of topic.
func readAll(t *testing.T, ctx context.Context, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	return testenv.ReadTopics(t, ctx, brokers, 500*time.Millisecond, topic)[topic]
}

// TestActions drives operator actions through the real path: the API
// writes commands to the broker, the joiner applies them in stream order
// and writes the operator columns and history to ClickHouse, requests go
// to reconcile.requests, and the loop closes (succeeded on resolution,
// operator_review past the deadline). Bad input writes nothing.
func TestActions(t *testing.T) {
	e := newActionsEnv(t)
	// stale: record and observation disagree; orphan: observed live with
	// no record, past the 5m grace once the watermark moves.
	e.send(contract.TypePlatformRecord, a0, appRecord("app-stale", "running"))
	e.send(contract.TypeProviderObservation, a0.Add(time.Second), appObservation("app-stale", "stopped"))
	e.send(contract.TypeProviderObservation, a0.Add(2*time.Second), appObservation("app-orphan", "running"))
	e.send(contract.TypeProviderObservation, a0.Add(6*time.Minute), appObservation("app-other", "running"))
	stale := "stale_lifecycle_state:app_runtime/app-stale"
	orphan := "orphan_provider_resource:app_runtime/app-orphan"
	e.waitFinding(orphan, "open", func(d apitypes.DriftDetail) bool { return d.Finding.Status == "open" })
	e.waitFinding(stale, "open", func(d apitypes.DriftDetail) bool { return d.Finding.Status == "open" })

	path := func(id string) string { return "/v1/findings/" + id + "/actions" }
	ack := map[string]any{"action": "acknowledge", "reason": "looking into it"}

	// Bad input: a clear 4xx with a reason, nothing written.
	e.refused(path(stale), "", ack, http.StatusBadRequest, contract.ReasonMissingIdempotency)
	e.refused(path(stale), "k-bad", map[string]any{"action": "reboot", "reason": "x"}, http.StatusBadRequest, contract.ReasonUnknownAction)
	e.refused(path("stale_lifecycle_state:app_runtime/nope"), "k-bad", ack, http.StatusNotFound, contract.ReasonFindingNotFound)
	e.refused(path(stale), "k-bad", map[string]any{"action": "cleanup", "reason": "x"}, http.StatusConflict, contract.ReasonCleanupNotOrphan)
	e.refused(path(stale), "k-bad", map[string]any{"action": "quarantine_node", "reason": "x"}, http.StatusConflict, contract.ReasonNotANode)
	e.refused(path(stale), "k-bad", map[string]any{"action": "assign", "reason": "x"}, http.StatusBadRequest, contract.ReasonMissingAssignee)
	e.refused(path(stale), "k-bad", map[string]any{"action": "unsuppress", "reason": "x"}, http.StatusConflict, contract.ReasonNotSuppressed)
	e.refused(path(stale), "k-bad", "not an object", http.StatusBadRequest, contract.ReasonBadBody)
	if c, r, rows := e.counts(); c != 0 || r != 0 || rows != 0 {
		t.Fatalf("refused actions wrote %d commands, %d requests, %d action_commands rows; want none", c, r, rows)
	}

	// Acknowledge, and the Idempotency-Key rules.
	code, first, _ := e.post(e.url, path(stale), "k-ack", ack)
	if code != http.StatusAccepted {
		t.Fatalf("acknowledge: %d %s", code, first)
	}
	var accepted apitypes.ActionAccepted
	if err := json.Unmarshal(first, &accepted); err != nil || accepted.CommandID == "" || accepted.EvidenceID != stale {
		t.Fatalf("acknowledge answer %s: %v", first, err)
	}
	replica := e.newAP() // another replica, or this one restarted
	for _, base := range []string{e.url, replica} {
		code, again, h := e.post(base, path(stale), "k-ack", ack)
		if code != http.StatusAccepted || !bytes.Equal(again, first) || h.Get("Idempotent-Replayed") != "true" {
			t.Errorf("re-post of k-ack to %s: %d %s, want the first answer %s", base, code, again, first)
		}
	}
	e.refused(path(stale), "k-ack", map[string]any{"action": "acknowledge", "reason": "another"}, http.StatusConflict, contract.ReasonIdempotencyReused)
	// The client's retry reaches a replica that lost the answer: the
	// command is written again (same id, a later occurred_at); the joiner
	// applies it once.
	if code, b, _ := e.post(e.amnesiac, path(stale), "k-ack", ack); code != http.StatusAccepted {
		t.Fatalf("re-post to a replica without the answer: %d %s", code, b)
	}
	d := e.waitFinding(stale, "acknowledged", func(d apitypes.DriftDetail) bool { return d.Finding.AcknowledgedBy != "" })
	if d.Finding.LastActionID != accepted.CommandID {
		t.Errorf("last_action_id %q, want %q", d.Finding.LastActionID, accepted.CommandID)
	}
	if h := d.History[len(d.History)-1]; h.Transition != string(contract.TransitionAction) || h.Action != "acknowledge" ||
		h.ActionID != accepted.CommandID || h.Reason != "looking into it" || h.ActorID == "" {
		t.Errorf("last history row %+v, want the acknowledge", h)
	}
	defer func() {
		// By now the joiner applied every command written before: the
		// acknowledge written twice is one history row.
		n := 0
		for _, h := range e.detail(stale).History {
			if h.ActionID == accepted.CommandID {
				n++
			}
		}
		if n != 1 {
			t.Errorf("the acknowledge written twice is in the history %d times, want once", n)
		}
	}()

	// Retry the stale finding and clean up the orphan: both write a
	// request and show it pending.
	if code, b, _ := e.post(e.url, path(stale), "k-retry", map[string]any{"action": "retry", "reason": "redeploy"}); code != http.StatusAccepted {
		t.Fatalf("retry: %d %s", code, b)
	}
	code, b, _ := e.post(e.url, path(orphan), "k-clean", map[string]any{"action": "cleanup", "reason": "leftover"})
	if code != http.StatusAccepted {
		t.Fatalf("cleanup: %d %s", code, b)
	}
	var cleanup apitypes.ActionAccepted
	_ = json.Unmarshal(b, &cleanup)
	e.waitFinding(stale, "pending", func(d apitypes.DriftDetail) bool { return d.Finding.ActionState == "pending" })
	e.waitFinding(orphan, "pending", func(d apitypes.DriftDetail) bool { return d.Finding.ActionState == "pending" })
	// A second retry while one is pending is refused by the API.
	e.refused(path(stale), "k-retry2", map[string]any{"action": "retry", "reason": "again"}, http.StatusConflict, contract.ReasonRequestPending)
	e.refused(path(orphan), "k-clean2", map[string]any{"action": "cleanup", "reason": "again"}, http.StatusConflict, contract.ReasonCleanupRollback)

	testenv.CheckFor(t, 20*time.Second, func() error {
		if _, r, _ := e.counts(); r != 2 {
			return fmt.Errorf("%d requests, want 2", r)
		}
		return nil
	})
	ctx := context.Background()
	var found bool
	for _, r := range readAll(t, ctx, e.env.Brokers, e.env.Names.Requests) {
		var req contract.Request
		if err := json.Unmarshal(r.Value, &req); err != nil {
			t.Fatal(err)
		}
		if req.RequestID == cleanup.CommandID {
			found = true
			if req.Action != "cleanup" || req.EvidenceID != orphan || req.Identity != "app_runtime/app-orphan" ||
				string(r.Key) != req.Identity || req.Runbook == "" || req.Deadline.IsZero() {
				t.Errorf("cleanup request %+v", req)
			}
		}
	}
	if !found {
		t.Errorf("no request with request_id %s", cleanup.CommandID)
	}

	// The loop closes: an observation resolves the stale finding
	// (succeeded); the orphan's request passes its deadline (2m of event
	// time) with the orphan still observed (operator_review).
	e.send(contract.TypeProviderObservation, a0.Add(7*time.Minute), appObservation("app-stale", "running"))
	e.send(contract.TypeProviderObservation, a0.Add(7*time.Minute), appObservation("app-orphan", "running"))
	e.send(contract.TypeProviderObservation, a0.Add(12*time.Minute), appObservation("app-other", "running"))
	e.waitFinding(stale, "succeeded", func(d apitypes.DriftDetail) bool {
		return d.Finding.Status == "resolved" && d.Finding.ActionState == "succeeded"
	})
	d = e.waitFinding(orphan, "in operator review", func(d apitypes.DriftDetail) bool {
		return d.Finding.ActionState == "operator_review"
	})
	if d.Finding.Posture != string(contract.PostureOperatorReview) || d.Finding.Status != "open" {
		t.Errorf("expired request: posture %s status %s, want operator_review, open", d.Finding.Posture, d.Finding.Status)
	}

	// Suppress: the row stays, it leaves the attention queue.
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if code, b, _ := e.post(e.url, path(orphan), "k-sup", map[string]any{"action": "suppress", "reason": "known", "until": until}); code != http.StatusAccepted {
		t.Fatalf("suppress: %d %s", code, b)
	}
	d = e.waitFinding(orphan, "suppressed", func(d apitypes.DriftDetail) bool { return d.Finding.SuppressedUntil != nil })
	if !d.Finding.SuppressedUntil.Equal(until) || d.Finding.AttentionScore != 0 {
		t.Errorf("suppressed finding: until %v score %v, want %v and 0", d.Finding.SuppressedUntil, d.Finding.AttentionScore, until)
	}

	// Batch: a preview touches nothing; the batch answers what it applied
	// to and what it refused.
	bpath := "/v1/actions/batch?status=all&resource_family=app_runtime"
	code, b, _ = e.post(e.url, bpath, "", map[string]any{"action": "assign", "reason": "triage", "assignee": "ops-eu", "preview": true})
	var preview apitypes.BatchAccepted
	if err := json.Unmarshal(b, &preview); code != http.StatusOK || err != nil || !preview.Preview {
		t.Fatalf("batch preview: %d %s", code, b)
	}
	cBefore, _, _ := e.counts()
	code, b, _ = e.post(e.url, bpath, "k-batch", map[string]any{"action": "assign", "reason": "triage", "assignee": "ops-eu"})
	var batch apitypes.BatchAccepted
	if err := json.Unmarshal(b, &batch); code != http.StatusAccepted || err != nil {
		t.Fatalf("batch: %d %s", code, b)
	}
	if batch.Count != preview.Count || len(batch.Refused) != len(preview.Refused) || batch.Count == 0 {
		t.Errorf("batch applied to %d (refused %d), preview said %d (refused %d)", batch.Count, len(batch.Refused), preview.Count, len(preview.Refused))
	}
	if c, _, _ := e.counts(); c != cBefore+batch.Count {
		t.Errorf("batch wrote %d commands, want %d", c-cBefore, batch.Count)
	}
	e.waitFinding(orphan, "assigned", func(d apitypes.DriftDetail) bool { return d.Finding.Assignee == "ops-eu" })

	// The command line: driftctl act (and query act).
	var out bytes.Buffer
	if err := cli.Run("act", []string{"-api", e.url, "-o", "json", "unsuppress", orphan, "reason=resolved upstream", "key=k-cli"}, &out); err != nil {
		t.Fatalf("act unsuppress: %v", err)
	}
	var viaCLI apitypes.ActionAccepted
	if err := json.Unmarshal(out.Bytes(), &viaCLI); err != nil || viaCLI.Status != "accepted" || viaCLI.Action != "unsuppress" {
		t.Errorf("act unsuppress printed %s (%v)", out.Bytes(), err)
	}
	e.waitFinding(orphan, "unsuppressed", func(d apitypes.DriftDetail) bool {
		return d.Finding.SuppressedUntil == nil && d.Finding.AttentionScore > 0
	})
	out.Reset()
	err := cli.Run("act", []string{"-api", e.url, "cleanup", stale, "reason=x"}, &out)
	if ae, ok := errors.AsType[*client.APIError](err); !ok || ae.StatusCode != http.StatusConflict || ae.Body.Reason != string(contract.ReasonFindingResolved) {
		t.Errorf("act cleanup of a resolved finding: %v, want 409 %s", err, contract.ReasonFindingResolved)
	}
	e.checkReplay()
}

// checkReplay replays the topics into a fresh database with a new joiner
// group: the findings, with their operator columns, and their histories,
// actions included, must be those the live run wrote.
func (e *actionsEnv) checkReplay() {
	e.t.Run("replay", func(t *testing.T) {
		conn := testenv.Open(t, testenv.ClickHouse(t))
		opts := joiner.Options{StageOptions: stream.StageOptions{Brokers: e.env.Brokers, Group: "actions-replay", Topics: e.env.Names,
			Logger: slog.New(slog.DiscardHandler)}, RoundOptions: stream.RoundOptions{FlushInterval: 50 * time.Millisecond},
			RequestTimeout: 2 * time.Minute}
		stop := streamtest.Start(t, "replay joiner", func(ctx context.Context) (*joiner.Joiner, error) {
			return joiner.New(ctx, opts, sink.NewClickHouse(conn))
		})
		defer stop()
		const evidence = `SELECT evidence_id, version, status, posture, retry_count, attention_score, acknowledged_by,
			assignee, suppressed_until, action_state, last_action_id FROM drift_evidence FINAL ORDER BY evidence_id`
		const history = `SELECT evidence_id, version, transition, status, action_state, action, action_id, actor_id,
			reason, refusal, at FROM drift_history FINAL ORDER BY evidence_id, version`
		for _, q := range []string{evidence, history} {
			want := dump(t, e.env.CH, q)
			testenv.CheckFor(t, 30*time.Second, func() error {
				if got := dump(t, conn, q); got != want {
					return fmt.Errorf("replay wrote\n%s\nthe live run\n%s", got, want)
				}
				return nil
			})
		}
	})
}

// dump returns the rows of q as text.
func dump(t *testing.T, conn chdriver.Conn, q string) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(rows.ColumnTypes()))
		for i, ct := range rows.ColumnTypes() {
			vals[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(vals...); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			fmt.Fprintf(&b, "%v\t", reflect.ValueOf(v).Elem().Interface())
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// staleApp is an open finding of no node: any operator key may act on it.
var staleApp = apitypes.Finding{EvidenceID: "stale_lifecycle_state:app_runtime/app-1", Provider: contract.ProviderAppRuntime,
	ProviderID: "app-1", Classification: string(contract.ClassStale), Status: string(contract.StatusOpen)}

// fixedActionServer serves the API over staleApp alone (findingsRead),
// with the action log log and the commands topic cmds.
func fixedActionServer(t *testing.T, log api.ActionLog, cmds *commandSink) string {
	t.Helper()
	return serveAPI(t, api.Options{Guard: testenv.LocalGuard(t), Auditor: memAuditor(t, &access.MemorySink{}),
		ReadModel: &findingsRead{findings: []apitypes.Finding{staleApp}}, Commands: cmds, Actions: log, Now: func() time.Time { return a0 }})
}

// TestIdempotencyKeyOtherBody: the same Idempotency-Key with another body
// is 409 (CONTRACT section 9.2), for one finding and for a batch, also
// when the bodies differ only in where a newline splits the reason from
// the assignee, which fields joined with "\n" hashed alike.
func TestIdempotencyKeyOtherBody(t *testing.T) {
	cmds := &commandSink{}
	base := fixedActionServer(t, &memActionLog{}, cmds)
	first := map[string]any{"action": "assign", "reason": "triage\nHUMAN::bob", "assignee": "HUMAN::carol"}
	for i, tc := range []struct {
		path  string
		other map[string]any
	}{
		{"/v1/findings/" + staleApp.EvidenceID + "/actions", map[string]any{"action": "assign", "reason": "triage", "assignee": "HUMAN::bob\nHUMAN::carol"}},
		{"/v1/actions/batch?status=open", map[string]any{"action": "assign", "reason": "triage", "assignee": "HUMAN::bob\nHUMAN::carol"}},
		{"/v1/findings/" + staleApp.EvidenceID + "/actions", map[string]any{"action": "assign", "reason": "triage\nHUMAN::bob", "assignee": "HUMAN::dave"}},
	} {
		key := fmt.Sprintf("split-%d", i)
		code, answer := postAs(t, base+tc.path, testenv.LocalKey, key, first)
		if code != 202 {
			t.Fatalf("%s %v: %d %s", tc.path, first, code, answer)
		}
		if code, again := postAs(t, base+tc.path, testenv.LocalKey, key, first); code != 202 || !bytes.Equal(again, answer) {
			t.Errorf("%s, the same body again: %d %s, want 202 %s", tc.path, code, again, answer)
		}
		code, b := postAs(t, base+tc.path, testenv.LocalKey, key, tc.other)
		if eb := decode[apitypes.ErrorBody](t, b); code != 409 || eb.Reason != string(contract.ReasonIdempotencyReused) {
			t.Errorf("%s under the key of %q: %q: %d %s, want 409 %s", tc.path, first, tc.other, code, b, contract.ReasonIdempotencyReused)
		}
	}
	if got := len(cmds.keys()); got != 3 {
		t.Errorf("%d commands written, want the 3 first posts'", got)
	}
}

// TestIdempotencyLegacyHash: a key accepted before the request hash
// framed its fields is stored with the SHA-256 of the fields joined with
// "\n"; the same request again is answered the first answer, another is
// 409, for one finding and for a batch.
func TestIdempotencyLegacyHash(t *testing.T) {
	legacy := func(fields ...string) string {
		h := sha256.Sum256([]byte(strings.Join(fields, "\n")))
		return hex.EncodeToString(h[:])
	}
	const until = "2026-12-01T00:00:00Z"
	findingAnswer := `{"command_id":"cmd-old-1","status":"accepted"}` + "\n"
	batchAnswer := `{"command_id":"cmd-old-2","count":1}` + "\n"
	log := &memActionLog{m: map[string]reader.AcceptedCommand{
		"old-finding": {IdempotencyKey: "old-finding", CommandID: "cmd-old-1", Answer: findingAnswer,
			RequestHash: legacy("finding", staleApp.EvidenceID, "suppress", "noisy", "", until, "false")},
		"old-batch": {IdempotencyKey: "old-batch", CommandID: "cmd-old-2", Answer: batchAnswer,
			RequestHash: legacy("batch", "status=open", "assign", "triage", "HUMAN::bob", "", "false")},
	}}
	cmds := &commandSink{}
	base := fixedActionServer(t, log, cmds)
	for _, tc := range []struct {
		path, key   string
		same, other map[string]any
		answer      string
	}{
		{"/v1/findings/" + staleApp.EvidenceID + "/actions", "old-finding",
			map[string]any{"action": "suppress", "reason": "noisy", "until": until},
			map[string]any{"action": "suppress", "reason": "noisy!", "until": until}, findingAnswer},
		{"/v1/actions/batch?status=open", "old-batch",
			map[string]any{"action": "assign", "reason": "triage", "assignee": "HUMAN::bob"},
			map[string]any{"action": "assign", "reason": "triage", "assignee": "HUMAN::carol"}, batchAnswer},
	} {
		if code, b := postAs(t, base+tc.path, testenv.LocalKey, tc.key, tc.same); code != 202 || string(b) != tc.answer {
			t.Errorf("%s, the first request again under %s: %d %s, want 202 %s", tc.path, tc.key, code, b, tc.answer)
		}
		code, b := postAs(t, base+tc.path, testenv.LocalKey, tc.key, tc.other)
		if eb := decode[apitypes.ErrorBody](t, b); code != 409 || eb.Reason != string(contract.ReasonIdempotencyReused) {
			t.Errorf("%s, another request under %s: %d %s, want 409 %s", tc.path, tc.key, code, b, contract.ReasonIdempotencyReused)
		}
	}
	if got := cmds.keys(); len(got) != 0 {
		t.Errorf("commands written for keys answered before: %v", got)
	}
}

// stallLog is an action log whose reads of a key it does not hold report
// on arrived and then wait until release is closed, answering what they
// read before the wait: a request held between its check of the log and
// the record of its answer.
type stallLog struct {
	memActionLog
	arrived chan struct{}
	release chan struct{}
}

func (l *stallLog) Accepted(ctx context.Context, key string) (reader.AcceptedCommand, bool, error) {
	c, ok, err := l.memActionLog.Accepted(ctx, key)
	if !ok {
		l.arrived <- struct{}{}
		<-l.release
	}
	return c, ok, err
}

// TestIdempotencyKeyConcurrent: two requests of one Idempotency-Key with
// different bodies at the same time are answered one after the other,
// the first 202 and the second 409, and one command is written. Before,
// both found the key unused and both were answered 202, while the
// joiner applied one command of the two (they share the key's command
// id).
func TestIdempotencyKeyConcurrent(t *testing.T) {
	cmds := &commandSink{}
	log := &stallLog{arrived: make(chan struct{}, 2), release: make(chan struct{})}
	u := fixedActionServer(t, log, cmds) + "/v1/findings/" + staleApp.EvidenceID + "/actions"
	bodies := []map[string]any{
		{"action": "acknowledge", "reason": "mine"},
		{"action": "assign", "reason": "yours", "assignee": "HUMAN::bob"},
	}
	codes, answers := make([]int, 2), make([][]byte, 2)
	var wg sync.WaitGroup
	post := func(i int) {
		wg.Go(func() { codes[i], answers[i] = postAs(t, u, testenv.LocalKey, "together", bodies[i]) })
	}
	post(0)
	<-log.arrived // the first request has found the key unused
	post(1)
	// Unserialized, the second request finds the key unused too and
	// arrives here; serialized, it waits for the first's answer.
	select {
	case <-log.arrived:
	case <-time.After(time.Second):
	}
	close(log.release)
	wg.Wait()
	eb := decode[apitypes.ErrorBody](t, answers[1])
	if codes[0] != 202 || codes[1] != 409 || eb.Reason != string(contract.ReasonIdempotencyReused) {
		t.Errorf("two bodies under one key at once: %d %s, then %d %s; want 202, then 409 %s",
			codes[0], answers[0], codes[1], answers[1], contract.ReasonIdempotencyReused)
	}
	if got := len(cmds.keys()); got != 1 {
		t.Errorf("%d commands written, want 1", got)
	}
}
