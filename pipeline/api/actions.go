package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/api/access"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

// Operator actions (CONTRACT section 9.2, docs/actions.md). An action is
// checked against the read model, written as an ops.command record to the
// commands topic and answered 202; the joiner applies it in stream order.
// The answer is kept by Idempotency-Key in the shared action log
// (ClickHouse), so a re-post to any replica, or after a restart, gets the
// first answer again. Within one process the requests of a key are
// answered one at a time (keyLocks); across replicas they are not, and
// two requests of one key with different bodies that reach two replicas
// at the same moment can both be answered 202 (docs/actions.md).

// CommandLog is where accepted actions go: a *kgo.Client producing to the
// commands topic is one.
type CommandLog interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// ActionLog keeps the answers to accepted actions by Idempotency-Key, for
// every replica; a *reader.ActionLog is one.
type ActionLog interface {
	Accepted(ctx context.Context, key string) (reader.AcceptedCommand, bool, error)
	Accept(ctx context.Context, c reader.AcceptedCommand) error
}

// ActionReader reads what the action checks need beyond the drift reads.
type ActionReader interface {
	NodeQuarantined(ctx context.Context, evidenceIDs []string) (bool, error)
	// NodeAuthority returns the master_of_record of each node of ids
	// that has a status row.
	NodeAuthority(ctx context.Context, nodeIDs []string) (map[string]string, error)
}

// authorityScope returns, for a principal scoped to authority levels, the
// master_of_record of the nodes the findings fs name; nil when the
// principal is not scoped (admin, or an operator key without levels).
func (s *Server) authorityScope(ctx context.Context, p access.Principal, fs []apitypes.Finding) (map[string]string, error) {
	if slices.Contains(p.Roles, contract.RoleAdmin) || len(p.AuthorityLevels) == 0 {
		return nil, nil
	}
	var ids []string
	for _, f := range fs {
		if f.Provider == contract.ProviderMAAS {
			ids = append(ids, f.ProviderID)
		}
	}
	if len(ids) == 0 {
		return map[string]string{}, nil
	}
	return s.actionReads.NodeAuthority(ctx, ids)
}

// outOfScope returns why p may not act on finding f given the nodes'
// levels (authorityScope), "" when it may. A node without a known
// master_of_record is out of every scope: a scoped key acts only where
// the level is known to be its own.
func outOfScope(p access.Principal, levels map[string]string, f apitypes.Finding) string {
	if levels == nil || f.Provider != contract.ProviderMAAS {
		return ""
	}
	level := levels[f.ProviderID]
	if access.AllowsAuthority(p, level) {
		return ""
	}
	if level == "" {
		level = "unknown"
	}
	return fmt.Sprintf("node %s has master_of_record %s; this key acts on %s only", f.ProviderID, level,
		strings.Join(p.AuthorityLevels, ", "))
}

// actorOf returns the actor_id an action is taken as: the authenticated
// principal's, which the access middleware put in the request's context
// before the handler runs (the action routes are never public).
func actorOf(r *http.Request) string {
	p, _ := access.FromContext(r.Context())
	return p.ActorID
}

// audit records the outcome of one action request in the audit log,
// beside the entry the middleware wrote when it admitted the request. A
// request the handler refuses with 403 (a node outside the key's
// authority_levels) is refused by access control after admission, so its
// outcome is recorded as the guard records its own refusals: result
// denied, with the refusal's message as reason, and counted among the
// denied requests. A failure to record is logged: the command is on its
// topic by then, and the admission entry already names the request.
func (s *Server) audit(r *http.Request, target string, code int, refusal error) {
	e := access.Entry{Target: target, Status: code, Result: access.ResultAllowed}
	if code == http.StatusForbidden {
		s.metrics.denied.WithLabelValues(itoa(code)).Inc()
		e.Result = access.ResultDenied
		if refusal != nil {
			e.Reason = refusal.Error()
		}
	}
	if err := access.Record(r.Context(), e); err != nil {
		s.opts.Logger.Warn("action outcome not audited", "target", target, "status", code, "err", err)
	}
}

// maxBatch is the most findings one batch action may touch; a wider
// filter is refused so that nobody acts on more than they previewed.
const maxBatch = 1000

// commandProducer is the producer of every ops.command the query service
// writes: with event ids derived from idempotency keys, the joiner's
// dedupe of (producer, event_id) applies a command posted twice once.
const commandProducer = "driftline-query"

// actionBody is the body of an action request.
type actionBody struct {
	Action   string    `json:"action"`
	Reason   string    `json:"reason"`
	Assignee string    `json:"assignee,omitempty"`
	Until    time.Time `json:"until,omitzero"`
	// Preview (batch only) lists what the batch would touch and writes
	// nothing.
	Preview bool `json:"preview,omitempty"`
}

// actionError is a refused action: its status and reason.
type actionError struct {
	code   int
	reason contract.ActionReason
	msg    string
}

func (e *actionError) Error() string { return e.msg }

func refuse(code int, reason contract.ActionReason, format string, args ...any) *actionError {
	return &actionError{code: code, reason: reason, msg: fmt.Sprintf(format, args...)}
}

// stateCode is the status of a refusal: 400 for a request that can never
// succeed as written, 409 for one the finding's state refuses.
func stateCode(r contract.ActionReason) int {
	switch r {
	case contract.ReasonUnknownAction, contract.ReasonMissingAssignee, contract.ReasonBadUntil, contract.ReasonBadBody:
		return http.StatusBadRequest
	}
	return http.StatusConflict
}

// readAction reads the Idempotency-Key and the body of an action request.
func readAction(r *http.Request, keyRequired bool) (string, actionBody, error) {
	var b actionBody
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if key == "" && keyRequired {
		return "", b, refuse(http.StatusBadRequest, contract.ReasonMissingIdempotency, "the Idempotency-Key header is required")
	}
	if len(key) > 256 {
		return "", b, refuse(http.StatusBadRequest, contract.ReasonMissingIdempotency, "the Idempotency-Key header is longer than 256 bytes")
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return key, b, refuse(http.StatusBadRequest, contract.ReasonBadBody, "body: %v; want {\"action\", \"reason\", \"assignee\"?, \"until\"?}", err)
	}
	if !contract.ValidAction(b.Action) {
		return key, b, refuse(http.StatusBadRequest, contract.ReasonUnknownAction, "action %q is not one of %s", b.Action,
			strings.Join(contract.Strings(contract.Actions), ", "))
	}
	return key, b, nil
}

// actionRequest is the canonical request of an action: what a re-post
// under the same Idempotency-Key must repeat exactly.
type actionRequest struct {
	kind    string // "finding" or "batch"
	subject string // the finding's evidence id, or the batch's sorted query
	body    actionBody
}

// requestHashPrefix marks a hash of the framed canonical request
// (requestHash). A stored hash without it was computed by
// legacyRequestHash, before the framing.
const requestHashPrefix = "v2:"

// fields returns the fields of the canonical request, in hash order.
func (q actionRequest) fields() []string {
	until := ""
	if !q.body.Until.IsZero() {
		until = q.body.Until.UTC().Format(time.RFC3339Nano)
	}
	return []string{q.kind, q.subject, q.body.Action, q.body.Reason, q.body.Assignee, until, strconv.FormatBool(q.body.Preview)}
}

// requestHash is requestHashPrefix and the hex SHA-256 of the canonical
// request, each field preceded by its length ("<len>:<bytes>"): two
// requests hash alike only when every field is the same, whatever bytes
// (newlines, say) a reason or assignee holds.
func (q actionRequest) requestHash() string {
	h := sha256.New()
	for _, f := range q.fields() {
		_, _ = fmt.Fprintf(h, "%d:%s", len(f), f) // a hash.Hash never fails to write
	}
	return requestHashPrefix + hex.EncodeToString(h.Sum(nil))
}

// legacyRequestHash is the hash the action log holds for keys accepted
// before requestHash framed its fields: the fields joined with "\n". It
// is ambiguous (a newline moved from the reason into the assignee hashes
// alike), and is only compared with those stored hashes, so that their
// keys still replay.
func (q actionRequest) legacyRequestHash() string {
	h := sha256.Sum256([]byte(strings.Join(q.fields(), "\n")))
	return hex.EncodeToString(h[:])
}

// sameAs reports whether stored, the hash recorded with a key's first
// answer, is the hash of q, in the format it was stored in.
func (q actionRequest) sameAs(stored string) bool {
	if strings.HasPrefix(stored, requestHashPrefix) {
		return stored == q.requestHash()
	}
	return stored == q.legacyRequestHash()
}

// commandID derives the command id of the action posted under key (and,
// for one finding of a batch, the finding's evidence id).
func commandID(key string) string {
	h := sha256.Sum256([]byte(key))
	return "cmd-" + hex.EncodeToString(h[:16])
}

// lockKey waits until no other request of key is being answered in this
// process (keyLocks) and returns the function that lets the next one go.
// A wait that outlasts the request is refused with 503: the client may
// post again under the same key.
func (s *Server) lockKey(ctx context.Context, key string) (func(), error) {
	unlock, err := s.idem.lock(ctx, key)
	if err != nil {
		return nil, refuse(http.StatusServiceUnavailable, "",
			"another request under Idempotency-Key %q is still being answered (%v); post again with the same key", key, err)
	}
	return unlock, nil
}

// replay answers a key seen before: the first answer again if the request
// is the same, 409 otherwise. It reports whether the key was seen.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, key string, q actionRequest) (bool, error) {
	prior, ok, err := s.opts.Actions.Accepted(r.Context(), key)
	if err != nil || !ok {
		return false, err
	}
	if !q.sameAs(prior.RequestHash) {
		return true, refuse(http.StatusConflict, contract.ReasonIdempotencyReused,
			"Idempotency-Key %q was used with another request (command %s); use a new key for a new action", key, prior.CommandID)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Idempotent-Replayed", "true")
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, prior.Answer)
	return true, nil
}

// facts returns the action facts of finding f as the read model knows
// them. Whether a record owns the identity is the joiner's to check
// (its state knows the owner_ref); the read model's guard is the rest.
func (s *Server) facts(ctx context.Context, f apitypes.Finding) (contract.FindingFacts, error) {
	ff := contract.FindingFacts{Classification: contract.Classification(f.Classification),
		Status: contract.FindingStatus(f.Status), Provider: f.Provider, ActionState: contract.ActionState(f.ActionState)}
	if f.SuppressedUntil != nil {
		ff.SuppressedUntil = *f.SuppressedUntil
	}
	of, err := s.read.FindingsOf(ctx, f.Provider, f.ProviderID)
	if err != nil {
		return ff, err
	}
	ids := make([]string, 0, len(of))
	for _, o := range of {
		ids = append(ids, o.EvidenceID)
		ff.IdentityPending = ff.IdentityPending || o.ActionState == string(contract.ActionPending)
	}
	if f.Provider == contract.ProviderMAAS {
		if ff.NodeQuarantined, err = s.actionReads.NodeQuarantined(ctx, ids); err != nil {
			return ff, err
		}
	}
	return ff, nil
}

// command returns the ops.command record of action b on finding f.
func (s *Server) command(f apitypes.Finding, id, key, actor string, b actionBody, at time.Time) *kgo.Record {
	payload := contract.Command{CommandID: id, EvidenceID: f.EvidenceID, Provider: f.Provider, ProviderID: f.ProviderID,
		Action: b.Action, Reason: b.Reason, Assignee: b.Assignee, Until: b.Until.UTC(), IdempotencyKey: key, ActorID: actor}
	p, err := json.Marshal(payload)
	if err != nil {
		panic("BUG: a command does not encode: " + err.Error())
	}
	env := struct {
		EventID       string          `json:"event_id"`
		EventType     string          `json:"event_type"`
		SchemaVersion int             `json:"schema_version"`
		Producer      string          `json:"producer"`
		OccurredAt    time.Time       `json:"occurred_at"`
		CorrelationID string          `json:"correlation_id,omitempty"`
		Environment   string          `json:"environment"`
		Payload       json.RawMessage `json:"payload"`
	}{id, contract.TypeCommand, contract.SchemaVersion, commandProducer, at, f.CorrelationID, s.opts.Environment, p}
	v, err := json.Marshal(env)
	if err != nil {
		panic("BUG: a command envelope does not encode: " + err.Error())
	}
	source := contract.SourceSystem
	if strings.HasPrefix(actor, contract.SourceHuman+"::") {
		source = contract.SourceHuman
	}
	return &kgo.Record{Topic: s.opts.Topics.Commands, Key: []byte(contract.IdentityKey(f.Provider, f.ProviderID)), Value: v,
		Timestamp: at, Headers: []kgo.RecordHeader{{Key: contract.HeaderActorID, Value: []byte(actor)},
			{Key: contract.HeaderSourceType, Value: []byte(source)}}}
}

// produce writes commands and waits for the broker (acks=all).
func (s *Server) produce(ctx context.Context, recs ...*kgo.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if err := s.opts.Commands.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("write commands to %s: %w", s.opts.Topics.Commands, err)
	}
	return nil
}

// actionsReady refuses actions when the server was started without a
// broker or action log.
func (s *Server) actionsReady() error {
	if s.opts.Commands == nil || s.opts.Actions == nil {
		return errors.New("actions are not configured: start the query service with -brokers (commands are written to Kafka)")
	}
	return nil
}

// handleAction serves POST /v1/findings/{evidence_id}/actions.
func (s *Server) handleAction(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("evidence_id")
	code, err := s.action(w, r, id, actorOf(r))
	s.audit(r, "finding:"+id, code, err)
	return err
}

func (s *Server) action(w http.ResponseWriter, r *http.Request, id, actor string) (int, error) {
	if err := allowOnly(r.URL.Query()); err != nil {
		return http.StatusBadRequest, err
	}
	if err := s.actionsReady(); err != nil {
		return http.StatusServiceUnavailable, err
	}
	key, b, err := readAction(r, true)
	if err != nil {
		return codeOf(err), err
	}
	// From the log's check to the record of the answer, the key is this
	// request's alone in this process, so a second request of the key
	// finds this one's answer; replicas are not serialized (keyLocks).
	unlock, err := s.lockKey(r.Context(), key)
	if err != nil {
		return codeOf(err), err
	}
	defer unlock()
	q := actionRequest{kind: "finding", subject: id, body: b}
	if seen, err := s.replay(w, r, key, q); seen || err != nil {
		return codeOf(err), err
	}
	f, ok, err := s.read.Finding(r.Context(), id)
	if err != nil {
		return http.StatusServiceUnavailable, err
	}
	if !ok {
		err := refuse(http.StatusNotFound, contract.ReasonFindingNotFound, "no finding with evidence_id %s", id)
		return err.code, err
	}
	p, _ := access.FromContext(r.Context())
	levels, err := s.authorityScope(r.Context(), p, []apitypes.Finding{f})
	if err != nil {
		return http.StatusServiceUnavailable, err
	}
	if why := outOfScope(p, levels, f); why != "" {
		err := refuse(http.StatusForbidden, contract.ReasonOutOfAuthority, "%s refused on %s: %s", b.Action, id, why)
		return err.code, err
	}
	now := s.opts.Now().UTC()
	ff, err := s.facts(r.Context(), f)
	if err != nil {
		return http.StatusServiceUnavailable, err
	}
	if why := contract.ActionAllowed(contract.Action(b.Action), ff, b.Assignee, b.Until, now); why != "" {
		err := refuse(stateCode(why), why, "%s refused on %s (status %s, classification %s, action_state %q): %s",
			b.Action, id, f.Status, f.Classification, f.ActionState, why)
		return err.code, err
	}
	cid := commandID(key)
	ans := apitypes.ActionAccepted{CommandID: cid, EvidenceID: id, Action: b.Action, ActorID: actor,
		Status: "accepted", AcceptedAt: now}
	if err := s.produce(r.Context(), s.command(f, cid, key, actor, b, now)); err != nil {
		return http.StatusServiceUnavailable, err
	}
	if err := s.accept(r.Context(), key, q.requestHash(), cid, id, b.Action, actor, now, ans); err != nil {
		return http.StatusServiceUnavailable, err
	}
	writeJSON(w, http.StatusAccepted, ans)
	return http.StatusAccepted, nil
}

// accept records the answer ans under key.
func (s *Server) accept(ctx context.Context, key, hash, cid, evidenceID, action, actor string, at time.Time, ans any) error {
	a, err := json.Marshal(ans)
	if err != nil {
		panic("BUG: an action answer does not encode: " + err.Error())
	}
	return s.opts.Actions.Accept(ctx, reader.AcceptedCommand{IdempotencyKey: key, RequestHash: hash, CommandID: cid,
		EvidenceID: evidenceID, Action: action, ActorID: actor, Answer: string(a) + "\n", AcceptedAt: at})
}

// handleBatchAction serves POST /v1/actions/batch: the drift list's
// filters (query parameters) select the findings, the body names the
// action. With "preview": true it answers which findings the action would
// touch and which it would refuse, and writes nothing (no key needed).
func (s *Server) handleBatchAction(w http.ResponseWriter, r *http.Request) error {
	code, err := s.batchAction(w, r, actorOf(r))
	s.audit(r, "batch:"+r.URL.RawQuery, code, err)
	return err
}

func (s *Server) batchAction(w http.ResponseWriter, r *http.Request, actor string) (int, error) {
	flt, err := parseFilter(r.URL.Query(), s.opts.Now())
	if err != nil {
		return http.StatusBadRequest, err
	}
	key, b, err := readAction(r, false)
	if err != nil {
		return codeOf(err), err
	}
	if err := s.actionsReady(); err != nil && !b.Preview {
		return http.StatusServiceUnavailable, err
	}
	if key == "" && !b.Preview {
		err := refuse(http.StatusBadRequest, contract.ReasonMissingIdempotency, "the Idempotency-Key header is required (or preview the batch with \"preview\": true)")
		return err.code, err
	}
	q := actionRequest{kind: "batch", subject: canonicalQuery(r), body: b}
	if !b.Preview {
		// As for one finding (action): the key is this request's alone in
		// this process until its answer is recorded.
		unlock, err := s.lockKey(r.Context(), key)
		if err != nil {
			return codeOf(err), err
		}
		defer unlock()
		if seen, err := s.replay(w, r, key, q); seen || err != nil {
			return codeOf(err), err
		}
	}
	order, _ := parseSort(nil, reader.DriftSorts)
	rows, err := s.read.Findings(r.Context(), flt, order, nil, maxBatch+1)
	if err != nil {
		return http.StatusServiceUnavailable, err
	}
	if len(rows) > maxBatch {
		err := &ParamError{Param: "filter", Reason: fmt.Sprintf("the filter selects more than %d findings; narrow it", maxBatch)}
		return http.StatusBadRequest, err
	}
	now := s.opts.Now().UTC()
	ans := apitypes.BatchAccepted{Action: b.Action, ActorID: actor, Preview: b.Preview, AcceptedAt: now,
		AppliedTo: []apitypes.ActionAccepted{}, Refused: []apitypes.ActionRefusal{}, Skipped: []apitypes.ActionRefusal{}}
	p, _ := access.FromContext(r.Context())
	levels, err := s.authorityScope(r.Context(), p, rows)
	if err != nil {
		return http.StatusServiceUnavailable, err
	}
	var recs []*kgo.Record
	for _, f := range rows {
		if why := outOfScope(p, levels, f); why != "" {
			ans.Skipped = append(ans.Skipped, apitypes.ActionRefusal{EvidenceID: f.EvidenceID, Reason: string(contract.ReasonOutOfAuthority), Detail: why})
			continue
		}
		ff, err := s.facts(r.Context(), f)
		if err != nil {
			return http.StatusServiceUnavailable, err
		}
		if why := contract.ActionAllowed(contract.Action(b.Action), ff, b.Assignee, b.Until, now); why != "" {
			ans.Refused = append(ans.Refused, apitypes.ActionRefusal{EvidenceID: f.EvidenceID, Reason: string(why)})
			continue
		}
		a := apitypes.ActionAccepted{EvidenceID: f.EvidenceID, Action: b.Action, ActorID: actor, Status: "preview", AcceptedAt: now}
		if !b.Preview {
			a.CommandID, a.Status = commandID(key+"\n"+f.EvidenceID), "accepted"
			recs = append(recs, s.command(f, a.CommandID, key, actor, b, now))
		}
		ans.AppliedTo = append(ans.AppliedTo, a)
	}
	ans.Count = len(ans.AppliedTo)
	if b.Preview {
		writeJSON(w, http.StatusOK, ans)
		return http.StatusOK, nil
	}
	if err := s.produce(r.Context(), recs...); err != nil {
		return http.StatusServiceUnavailable, err
	}
	if err := s.accept(r.Context(), key, q.requestHash(), commandID(key), "", b.Action, actor, now, ans); err != nil {
		return http.StatusServiceUnavailable, err
	}
	writeJSON(w, http.StatusAccepted, ans)
	return http.StatusAccepted, nil
}

// canonicalQuery is the batch's query string with its parameters sorted.
func canonicalQuery(r *http.Request) string { return r.URL.Query().Encode() }

// codeOf is the status route answers err with.
func codeOf(err error) int {
	if err == nil {
		return http.StatusAccepted
	}
	if ae, ok := errors.AsType[*actionError](err); ok {
		return ae.code
	}
	if _, ok := errors.AsType[*ParamError](err); ok {
		return http.StatusBadRequest
	}
	return http.StatusServiceUnavailable
}

// routeAction serves POST /v1/findings/{evidence_id}/actions. The
// evidence id holds '/' ("orphan_provider_resource:maas/n1"), so the
// route takes the rest of the path and cuts the "/actions" suffix.
func (s *Server) routeAction(w http.ResponseWriter, r *http.Request) error {
	id, ok := strings.CutSuffix(r.PathValue("evidence_id"), "/actions")
	if !ok || id == "" {
		writeJSON(w, http.StatusNotFound, apitypes.ErrorBody{Error: "no such endpoint: " + r.URL.Path})
		return nil
	}
	r.SetPathValue("evidence_id", id)
	return s.handleAction(w, r)
}

// noActionReads answers for a read model without the action reads (a
// test's fake): no node is known quarantined.
type noActionReads struct{}

func (noActionReads) NodeQuarantined(context.Context, []string) (bool, error) { return false, nil }

func (noActionReads) NodeAuthority(context.Context, []string) (map[string]string, error) {
	return map[string]string{}, nil
}
