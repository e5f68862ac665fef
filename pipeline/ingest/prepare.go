package ingest

import (
	"bytes"
	"strings"
	"time"

	json "github.com/segmentio/encoding/json"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
)

// batch is one request's lines and the records they produce, in line order.
type batch struct {
	pol       *policy
	principal *keys.Principal
	lines     []line
	repeats   int // how many lines repeat an earlier line's dedupe identity
}

// line is one non-blank line of a request.
type line struct {
	receipt  Receipt
	dedupeID string          // valid lines only
	digest   contract.Digest // valid lines only: contract.EventDigest
	topic    string          // accepted lines only: destination topic
	fanout   bool            // write one copy to every partition of topic
	key      []byte
	value    []byte // the original line (or the quarantine document)
	rejected bool
	// heldDigest is, for a line rejected as a conflict, the digest its
	// dedupe identity was accepted with.
	heldDigest contract.Digest
	// repeats is, for a line whose dedupe identity an earlier valid line
	// of the request holds, the index in the batch's lines of the first
	// such line; -1 for every other line.
	repeats int
}

// prepare validates and authorises every line of body. It does not touch
// the broker. Keys are appended to one per-request arena, and the lines'
// dedupe identities are checked against the recent set under one lock.
// Decoding is zero-copy: nothing kept in the batch may alias body except
// values, receipts' event ids (both used before body is recycled).
func (g *Gateway) prepare(pol *policy, p *keys.Principal, body []byte) *batch {
	n := bytes.Count(body, []byte{'\n'}) + 1
	b := &batch{pol: pol, principal: p, lines: make([]line, 0, n)}
	inRequest := make(map[string]int, n) // dedupe identity -> index of its first valid line
	keys := make([]byte, 0, 24*n)        // the lines' keys, back to back
	now := g.opts.now()
	receivedAt := now.UTC().Format(time.RFC3339Nano)
	aheadLimit := now.Add(g.opts.MaxClockSkew)
	lineNo := 0
	for len(body) > 0 {
		lineNo++
		raw := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			raw, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		raw = bytes.TrimSuffix(raw, []byte{'\r'})
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		l := line{receipt: Receipt{Line: lineNo}, repeats: -1}
		env, payload, verr := g.check(p, raw)
		if verr == nil && env.OccurredAt.After(aheadLimit) {
			verr = contract.ClockSkewError(env.OccurredAt, now, g.opts.MaxClockSkew)
		}
		if verr != nil {
			l.receipt.EventID = env.EventID // the validator reads it first, so most rejections still name it
			g.reject(&l, pol, p, raw, verr, receivedAt)
			b.lines = append(b.lines, l)
			continue
		}
		l.receipt.EventID = env.EventID
		l.dedupeID = dedupeID(&env)
		l.digest = contract.EventDigest(&env)
		if first, dup := inRequest[l.dedupeID]; dup {
			// Answered once the first line's outcome is final: it may
			// still conflict with an identity accepted before.
			l.repeats = first
			l.value = raw
			b.repeats++
			b.lines = append(b.lines, l)
			continue
		}
		inRequest[l.dedupeID] = len(b.lines)
		l.receipt.Status = StatusAccepted
		l.topic = g.opts.Topics.ForType(env.EventType)
		l.fanout = contract.Broadcast(env.EventType)
		// Each key is capped at its length, so later appends never write
		// into it; when the arena grows, earlier keys stay in the old one.
		start := len(keys)
		keys = contract.AppendKey(keys, payload)
		l.key = keys[start:len(keys):len(keys)]
		l.value = raw
		b.lines = append(b.lines, l)
	}
	g.markRecent(b, receivedAt)
	g.settleRepeats(b, receivedAt)
	return b
}

// markRecent answers duplicate for accepted lines whose event this
// gateway accepted in earlier requests, and rejects those that reuse an
// accepted identity with other content. Lines repeating an earlier line's
// identity are left to settleRepeats.
func (g *Gateway) markRecent(b *batch, receivedAt string) {
	g.recent.mu.Lock()
	defer g.recent.mu.Unlock()
	for i := range b.lines {
		l := &b.lines[i]
		if l.receipt.Status != StatusAccepted {
			continue
		}
		first, seen := g.recent.lookup(l.dedupeID)
		switch {
		case !seen:
		case first == l.digest:
			l.receipt.Status = StatusDuplicate
			l.key, l.value, l.topic, l.fanout = nil, nil, "", false
		default:
			g.conflict(l, b.pol, b.principal, l.value, first, receivedAt)
		}
	}
}

// settleRepeats answers the lines that repeat the dedupe identity of an
// earlier line of the request, once markRecent made that line's outcome
// final. The identity is held by the digest it was accepted with: the
// first line's own when that line was accepted or a duplicate, the one it
// conflicted with when it was rejected as a conflict. A repeat with that
// digest is a duplicate of an accepted event; one with another digest is
// rejected as a conflict with it, so a copy of a conflicting line is
// rejected with the same reason and digests, never answered duplicate of
// an event that was not accepted.
func (g *Gateway) settleRepeats(b *batch, receivedAt string) {
	if b.repeats == 0 {
		return
	}
	for i := range b.lines {
		l := &b.lines[i]
		if l.repeats < 0 {
			continue
		}
		first := &b.lines[l.repeats]
		held := first.digest
		if first.rejected {
			held = first.heldDigest
		}
		if l.digest == held {
			l.receipt.Status = StatusDuplicate
			l.value = nil
			continue
		}
		g.conflict(l, b.pol, b.principal, l.value, held, receivedAt)
	}
}

// reject turns l into a rejected line: its receipt names verr, and its
// record is the quarantine document of raw.
func (g *Gateway) reject(l *line, pol *policy, p *keys.Principal, raw []byte, verr *contract.ValidationError, receivedAt string) {
	l.rejected = true
	l.receipt.Status = StatusRejected
	l.receipt.Reason, l.receipt.Field, l.receipt.Detail = verr.Reason, verr.Field, verr.Detail
	l.topic = g.opts.Topics.Quarantine
	l.fanout = false
	l.key = []byte(p.ActorID)
	l.value = g.quarantineDoc(pol, p, raw, verr, l.receipt.EventID, receivedAt)
}

// conflict rejects l, whose dedupe identity was accepted before with the
// content digest first (another than l's): a producer reusing an event_id
// or a seq. The first event stays the accepted one; this one is
// quarantined, not dropped.
func (g *Gateway) conflict(l *line, pol *policy, p *keys.Principal, raw []byte, first contract.Digest, receivedAt string) {
	verr := &contract.ValidationError{Reason: contract.ReasonConflictingDuplicate, Field: dedupeField(l.dedupeID),
		Detail: "the dedupe identity was accepted before with content digest " + first.String() +
			", this event's is " + l.digest.String() + ": a redelivery repeats the content, so the producer reused the identity"}
	g.reject(l, pol, p, raw, verr, receivedAt)
	l.heldDigest = first
	l.receipt.FirstDigest, l.receipt.Digest = first.String(), l.digest.String()
}

// check validates raw with the shared validator and authorises it for p.
func (g *Gateway) check(p *keys.Principal, raw []byte) (contract.Envelope, any, *contract.ValidationError) {
	env, payload, verr := g.validator.DecodeEvent(raw)
	if verr != nil {
		return env, nil, verr
	}
	if !p.MayType(env.EventType) {
		return env, nil, &contract.ValidationError{Reason: contract.ReasonUnauthorizedType, Field: "event_type",
			Detail: "the API key of " + p.ActorID + " may not send " + env.EventType}
	}
	if !p.MayProduce(env.Producer) {
		return env, nil, &contract.ValidationError{Reason: contract.ReasonUnauthorizedProducer, Field: "producer",
			Detail: "the API key of " + p.ActorID + " may not send as producer " + strings.Clone(env.Producer)}
	}
	return env, payload, nil
}

// quarantineDoc encodes the quarantine record value of a rejected line.
func (g *Gateway) quarantineDoc(pol *policy, p *keys.Principal, raw []byte, verr *contract.ValidationError, eventID, receivedAt string) []byte {
	doc := contract.Quarantined{
		Reason:     verr.Reason,
		Field:      verr.Field,
		Detail:     verr.Detail,
		EventID:    eventID,
		ActorID:    p.ActorID,
		SourceType: p.SourceType,
		PolicyRev:  pol.rev,
		ReceivedAt: receivedAt,
	}
	doc.SetLine(raw, g.opts.QuarantineLineLimit)
	if doc.Truncated {
		g.m.quarantineSize.Add(float64(len(raw) - g.opts.QuarantineLineLimit))
	}
	v, err := json.Marshal(doc)
	if err != nil {
		panic("BUG: quarantine document does not encode: " + err.Error())
	}
	return v
}

// headers returns the record headers of p's records; reason is set on
// quarantine records.
func (g *Gateway) headers(pol *policy, p *keys.Principal, reason contract.Reason) []kgo.RecordHeader {
	h := []kgo.RecordHeader{
		{Key: contract.HeaderActorID, Value: []byte(p.ActorID)},
		{Key: contract.HeaderSourceType, Value: []byte(p.SourceType)},
		{Key: contract.HeaderPolicyRev, Value: []byte(pol.rev)},
	}
	if reason != "" {
		h = append(h, kgo.RecordHeader{Key: contract.HeaderReason, Value: []byte(reason)})
	}
	return h
}
