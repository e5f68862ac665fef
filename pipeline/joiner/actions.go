package joiner

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/drift"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

// noDue marks an action book with nothing due.
const noDue = int64(1<<63 - 1)

// actionBook is what operator actions added to a partition's findings
// (docs/actions.md): the operator columns of each finding an action
// touched, the nodes an operator quarantined, and the deadlines of
// pending requests and suppressions. It changes only with commands
// applied in stream order and with the watermark, never with the wall
// clock, so a restore or a replay rebuilds it exactly; it is part of the
// partition's snapshot.
type actionBook struct {
	// findings holds the operator state of each finding an action touched,
	// by evidence id: few findings of the many a partition holds.
	findings map[string]*findingActions
	// quarantined holds the identity keys of the nodes quarantined by an
	// operator (quarantine_node applied, release_node not yet).
	quarantined map[string]bool
	// due is the earliest pending deadline or suppression end (Unix ns
	// of event time), noDue when none.
	due int64
	// applied holds the ids of the commands applied (or refused): a
	// command written twice (a client's retry after the query service
	// died, two replicas answering one key) carries the same id but maybe
	// another occurred_at, which the event dedupe does not catch when it
	// falls in another bucket. Commands are few; every id is kept.
	applied map[string]struct{}
	// sent holds the ids of requests already on the requests topic when
	// the partition was restored (producedRequests): the live
	// re-application of an uncommitted command does not produce its
	// request again. Not part of the snapshot.
	sent map[string]struct{}
	// note is the action of the transition being emitted (set around an
	// engine Touch), for its history row; nil for the classifier's own.
	note *actionNote
}

// findingActions is the operator state of one finding.
type findingActions struct {
	provider, providerID string
	class                drift.Class
	acknowledgedBy       string
	assignee             string
	suppressedUntil      int64 // Unix ns, 0 when not suppressed
	state                contract.ActionState
	lastActionID         string
	deadline             int64 // of the pending request, Unix ns
}

// actionNote describes the action behind one emitted transition.
type actionNote struct {
	action  contract.Action
	id      string
	actor   string
	reason  string
	refusal contract.ActionReason
	at      time.Time
}

func newActionBook() *actionBook {
	return &actionBook{findings: map[string]*findingActions{}, quarantined: map[string]bool{}, applied: map[string]struct{}{}, due: noDue}
}

// overlay adds the operator state of f's finding to f as the engine
// emitted it, at watermark w: a pending request ends as succeeded when
// the finding resolves; a finding whose request expired has the posture
// operator_review while open; a suppressed finding scores 0 (it leaves
// the attention queue, its row stays).
func (b *actionBook) overlay(f *drift.Finding, w int64) {
	fa := b.findings[f.EvidenceID]
	if fa == nil {
		return
	}
	if f.Status == contract.StatusResolved && fa.state == contract.ActionPending {
		fa.state = contract.ActionSucceeded
		b.recompute()
	}
	f.AcknowledgedBy, f.Assignee, f.ActionState, f.LastActionID = fa.acknowledgedBy, fa.assignee, fa.state, fa.lastActionID
	if fa.suppressedUntil != 0 {
		f.SuppressedUntil = time.Unix(0, fa.suppressedUntil).UTC()
	}
	if f.Status == contract.StatusOpen {
		if fa.state == contract.ActionOperatorReview {
			f.Posture, f.NextAttemptAt = contract.PostureOperatorReview, time.Time{}
		}
		if fa.suppressedUntil > w {
			f.AttentionScore = 0
		}
	}
}

// facts returns what decides whether an action may be applied to the
// finding of class k on provider/providerID, as the partition knows it.
func (j *Joiner) facts(part *partition, c *contract.Command, k drift.Class, status contract.FindingStatus) contract.FindingFacts {
	b := part.acts
	key := contract.IdentityKey(c.Provider, c.ProviderID)
	f := contract.FindingFacts{Classification: contract.Classifications[k], Status: status, Provider: c.Provider,
		NodeQuarantined: b.quarantined[key], Owned: part.engine.Owned(c.Provider, c.ProviderID)}
	if fa := b.findings[c.EvidenceID]; fa != nil {
		f.ActionState = fa.state
		if fa.suppressedUntil != 0 {
			f.SuppressedUntil = time.Unix(0, fa.suppressedUntil).UTC()
		}
	}
	for _, fa := range b.findings {
		if fa.state == contract.ActionPending && fa.provider == c.Provider && fa.providerID == c.ProviderID {
			f.IdentityPending = true
			break
		}
	}
	return f
}

// applyCommand applies one operator action in stream order: it checks it
// against the partition's state at its watermark, records it in the
// action book, emits the finding again with an action (or action_refused)
// history row, and for the actions that ask the platform to act, adds a
// request to reconcile.requests. at is the command's occurred_at (when
// the query service accepted it); it does not move event time.
func (j *Joiner) applyCommand(part *partition, c *contract.Command, at time.Time, correlationID string) {
	// The decoder's strings alias the record, which is recycled: the
	// book keeps copies.
	cmd := *c
	for _, f := range []*string{&cmd.CommandID, &cmd.EvidenceID, &cmd.Provider, &cmd.ProviderID, &cmd.Action,
		&cmd.Reason, &cmd.Assignee, &cmd.ActorID} {
		*f = strings.Clone(*f)
	}
	c = &cmd
	if _, ok := part.acts.applied[c.CommandID]; ok {
		j.countAction(part, c.Action, "duplicate")
		return
	}
	part.acts.applied[c.CommandID] = struct{}{}
	class, _, _ := strings.Cut(c.EvidenceID, ":")
	k, ok := drift.ParseClass(class)
	if !ok || drift.EvidenceID(k, contract.IdentityKey(c.Provider, c.ProviderID)) != c.EvidenceID {
		j.countAction(part, c.Action, string(contract.ReasonFindingNotFound))
		return
	}
	status, ok := part.engine.Status(c.Provider, c.ProviderID, k)
	if !ok {
		j.countAction(part, c.Action, string(contract.ReasonFindingNotFound))
		return
	}
	b := part.acts
	w := part.engine.Watermark()
	action := contract.Action(c.Action)
	note := &actionNote{action: action, id: c.CommandID, actor: c.ActorID, reason: c.Reason, at: at.UTC()}
	fa := b.findings[c.EvidenceID]
	if fa == nil {
		fa = &findingActions{provider: c.Provider, providerID: c.ProviderID, class: k}
		b.findings[c.EvidenceID] = fa
	}
	fa.lastActionID = c.CommandID
	if why := contract.ActionAllowed(action, j.facts(part, c, k, status), c.Assignee, c.Until, w); why != "" {
		note.refusal = why
		j.countAction(part, c.Action, string(why))
		j.touch(part, fa, c.EvidenceID, contract.TransitionActionRefused, note)
		return
	}
	j.countAction(part, c.Action, "applied")
	key := contract.IdentityKey(c.Provider, c.ProviderID)
	switch action {
	case contract.ActionAcknowledge:
		fa.acknowledgedBy = c.ActorID
	case contract.ActionAssign:
		fa.assignee = c.Assignee
	case contract.ActionSuppress:
		fa.suppressedUntil = c.Until.UnixNano()
	case contract.ActionUnsuppress:
		fa.suppressedUntil = 0
	case contract.ActionQuarantineNode:
		b.quarantined[key] = true
		part.nodes.SetOperatorQuarantine(c.ProviderID, true, at, correlationID) // lifecycle rule 3, at the command's time
	case contract.ActionReleaseNode:
		delete(b.quarantined, key)
		part.nodes.SetOperatorQuarantine(c.ProviderID, false, at, correlationID)
	}
	if action.Requests() {
		deadline := w.Add(j.opts.RequestTimeout)
		fa.state, fa.deadline = contract.ActionPending, deadline.UnixNano()
		if _, done := b.sent[c.CommandID]; part.out.emit && !done {
			if correlationID == "" {
				correlationID = c.CommandID
			}
			part.requests = append(part.requests, j.request(c, k, key, correlationID, at, deadline))
		}
	}
	b.recompute()
	j.touch(part, fa, c.EvidenceID, contract.TransitionAction, note)
}

// request returns the record of the request an applied command makes.
// Its request_id is the command's id, so the request of a command
// replayed after a crash is recognisably the same.
func (j *Joiner) request(c *contract.Command, k drift.Class, key, correlationID string, at, deadline time.Time) *kgo.Record {
	v, err := json.Marshal(contract.Request{RequestID: c.CommandID, Action: c.Action, EvidenceID: c.EvidenceID,
		Identity: key, Runbook: drift.PolicyOf(k).Runbook, CorrelationID: correlationID, ActorID: c.ActorID,
		RequestedAt: at.UTC(), Deadline: deadline.UTC()})
	if err != nil {
		panic("BUG: a request does not encode: " + err.Error())
	}
	return &kgo.Record{Topic: j.opts.Topics.Requests, Key: []byte(key), Value: v, Timestamp: at}
}

// touch emits the finding of fa again with transition, its history row
// carrying note.
func (j *Joiner) touch(part *partition, fa *findingActions, evidenceID string, transition contract.Transition, note *actionNote) {
	part.acts.note = note
	if !part.engine.Touch(fa.provider, fa.providerID, fa.class, transition) {
		panic("BUG: an action's finding " + evidenceID + " vanished")
	}
	part.acts.note = nil
}

// annotate fills the action columns of tr, the history row of a
// transition emitted while the book's note is set, and leaves its
// expected and observed columns empty.
func (b *actionBook) annotate(tr *sink.Transition) {
	if n := b.note; n != nil {
		tr.Action, tr.ActionID, tr.ActorID, tr.Reason, tr.Refusal = n.action, n.id, n.actor, n.reason, n.refusal
		// An action row records the action, not the resource: a live
		// joiner may apply a command and an observation produced at the
		// same moment in either order (the merge's live tail), a replay
		// in timestamp order, and the observed columns would differ.
		tr.ExpectedState, tr.ObservedState, tr.ObservedVersion = "", "", ""
		if !n.at.IsZero() {
			tr.At = n.at
		}
	}
}

// fireActions ends, once the watermark w passed them, the pending
// requests (operator_review) and suppressions that are due, in evidence
// id order, and emits their findings again.
func (j *Joiner) fireActions(part *partition, w int64) {
	b := part.acts
	var ids []string
	for id, fa := range b.findings {
		if fa.state == contract.ActionPending && fa.deadline <= w || fa.suppressedUntil != 0 && fa.suppressedUntil <= w {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		fa := b.findings[id]
		transition := contract.TransitionSuppressionEnded
		if fa.state == contract.ActionPending && fa.deadline <= w {
			fa.state = contract.ActionOperatorReview
			transition = contract.TransitionRequestExpired
		}
		if fa.suppressedUntil != 0 && fa.suppressedUntil <= w {
			fa.suppressedUntil = 0
		}
		j.touch(part, fa, id, transition, nil)
	}
	b.recompute()
}

// recompute sets due to the earliest deadline still ahead.
func (b *actionBook) recompute() {
	b.due = noDue
	for _, fa := range b.findings {
		if fa.state == contract.ActionPending {
			b.due = min(b.due, fa.deadline)
		}
		if fa.suppressedUntil != 0 {
			b.due = min(b.due, fa.suppressedUntil)
		}
	}
}

// appendSnapshot writes the book, in evidence id order.
func (b *actionBook) appendSnapshot(w *snap.Writer) {
	ids := slices.Sorted(maps.Keys(b.findings))
	w.Uvarint(uint64(len(ids)))
	for _, id := range ids {
		fa := b.findings[id]
		w.String(id)
		w.String(fa.provider)
		w.String(fa.providerID)
		w.Byte(byte(fa.class))
		w.String(fa.acknowledgedBy)
		w.String(fa.assignee)
		w.Varint(fa.suppressedUntil)
		w.String(string(fa.state))
		w.String(fa.lastActionID)
		w.Varint(fa.deadline)
	}
	w.Strings(slices.Sorted(maps.Keys(b.quarantined)))
	w.Strings(slices.Sorted(maps.Keys(b.applied)))
}

// loadSnapshot reads what appendSnapshot wrote into an empty book.
func (b *actionBook) loadSnapshot(r *snap.Reader) error {
	n := r.Count(8)
	for range n {
		id := r.String()
		fa := &findingActions{provider: r.String(), providerID: r.String(), class: drift.Class(r.Byte()),
			acknowledgedBy: r.String(), assignee: r.String(), suppressedUntil: r.Varint(),
			state: contract.ActionState(r.String()), lastActionID: r.String(), deadline: r.Varint()}
		if fa.class >= drift.NumClasses {
			r.Fail(errBadActionClass)
		}
		b.findings[id] = fa
	}
	for range r.Count(1) {
		b.quarantined[r.String()] = true
	}
	for range r.Count(1) {
		b.applied[r.String()] = struct{}{}
	}
	b.recompute()
	return r.Err()
}

// countAction counts a command applied live (a restore replays commands
// counted before).
func (j *Joiner) countAction(part *partition, action, outcome string) {
	if part.out.emit {
		j.m.actions.WithLabelValues(action, outcome).Inc()
	}
}

// requestWindow is how far back in produce time a restore reads the
// requests topic for the requests a predecessor produced and did not
// commit: far more than a round.
const requestWindow = time.Hour

// producedRequests returns the request ids on the requests topic
// produced in the last requestWindow: a partition restored after a crash
// re-applies its uncommitted commands live, and must not produce their
// requests again (sentRequests).
func (j *Joiner) producedRequests(ctx context.Context) (map[string]struct{}, error) {
	if j.opts.Requests == nil {
		return nil, nil
	}
	adm := kadm.NewClient(j.opts.Requests)
	topic := j.opts.Topics.Requests
	from, err := adm.ListOffsetsAfterMilli(ctx, time.Now().Add(-requestWindow).UnixMilli(), topic)
	if err != nil {
		return nil, fmt.Errorf("list requests offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list requests offsets: %w", err)
	}
	start, want := map[int32]kgo.Offset{}, map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		f, ok := from.Lookup(topic, o.Partition)
		if o.Err != nil || !ok || f.Err != nil || f.Offset >= o.Offset || f.Offset < 0 {
			return
		}
		start[o.Partition], want[o.Partition] = kgo.NewOffset().At(f.Offset), o.Offset
	})
	ids := map[string]struct{}{}
	if len(start) == 0 {
		return ids, nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(j.opts.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start})}, j.opts.ClientOpts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for _, e := range fs.Errors() {
			return nil, fmt.Errorf("read requests: %w", e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var req struct {
				RequestID string `json:"request_id"`
			}
			if json.Unmarshal(r.Value, &req) == nil && req.RequestID != "" {
				ids[req.RequestID] = struct{}{}
			}
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return ids, nil
}
