package ingest

import (
	"bytes"
	"strings"
	"time"
	"unicode/utf8"

	json "github.com/segmentio/encoding/json"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/event"
)

// batch is one request's lines and the records they produce, in line order.
type batch struct {
	pol       *policy
	principal *Principal
	lines     []line
}

// line is one non-blank line of a request.
type line struct {
	receipt  Receipt
	dedupeID string // accepted lines only
	topic    string // accepted lines only: destination topic
	fanout   bool   // write one copy to every partition of topic
	key      []byte
	value    []byte // the original line (or the quarantine document)
	rejected bool
}

// prepare validates and authorises every line of body. It does not touch
// the broker.
func (g *Gateway) prepare(pol *policy, p *Principal, body []byte) *batch {
	b := &batch{pol: pol, principal: p}
	inRequest := map[string]bool{}
	receivedAt := g.opts.now().UTC().Format(time.RFC3339Nano)
	n := 0
	for len(body) > 0 {
		n++
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
		l := line{receipt: Receipt{Line: n}}
		env, verr := g.check(p, raw)
		if verr != nil {
			l.rejected = true
			l.receipt.Status = StatusRejected
			l.receipt.Reason, l.receipt.Field, l.receipt.Detail = verr.Reason, verr.Field, verr.Detail
			l.receipt.EventID = env.EventID // the validator reads it first, so most rejections still name it
			l.topic = g.opts.Topics.Quarantine
			l.key = []byte(p.ActorID)
			l.value = g.quarantineDoc(pol, p, raw, verr, l.receipt.EventID, receivedAt)
			b.lines = append(b.lines, l)
			continue
		}
		l.receipt.EventID = env.EventID
		l.dedupeID = dedupeID(&env.Envelope)
		if inRequest[l.dedupeID] || g.recent.contains(l.dedupeID) {
			l.receipt.Status = StatusDuplicate
			b.lines = append(b.lines, l)
			continue
		}
		inRequest[l.dedupeID] = true
		l.receipt.Status = StatusAccepted
		l.topic = g.opts.Topics.ForType(env.EventType)
		l.fanout = env.EventType == event.TypeScanCompleted
		l.key = []byte(env.key)
		l.value = raw
		b.lines = append(b.lines, l)
	}
	return b
}

// checked is a validated, authorised event.
type checked struct {
	event.Envelope
	key string
}

// check validates raw with the shared validator and authorises it for p.
func (g *Gateway) check(p *Principal, raw []byte) (checked, *event.ValidationError) {
	env, payload, verr := g.validator.DecodeEvent(raw)
	if verr != nil {
		return checked{Envelope: env}, verr
	}
	c := checked{Envelope: env, key: event.KeyOf(payload)}
	if !p.MayType(env.EventType) {
		return c, &event.ValidationError{Reason: event.ReasonUnauthorizedType, Field: "event_type",
			Detail: "the API key of " + p.ActorID + " may not send " + env.EventType}
	}
	if !p.MayProduce(env.Producer) {
		return c, &event.ValidationError{Reason: event.ReasonUnauthorizedProducer, Field: "producer",
			Detail: "the API key of " + p.ActorID + " may not send as producer " + env.Producer}
	}
	return c, nil
}

// quarantineDoc encodes the quarantine record value of a rejected line.
func (g *Gateway) quarantineDoc(pol *policy, p *Principal, raw []byte, verr *event.ValidationError, eventID, receivedAt string) []byte {
	kept := raw
	if len(kept) > g.opts.QuarantineLineLimit {
		kept = kept[:g.opts.QuarantineLineLimit]
		g.m.quarantineSize.Add(float64(len(raw) - len(kept)))
	}
	doc := QuarantineValue{
		Reason:     verr.Reason,
		Field:      verr.Field,
		Detail:     verr.Detail,
		Line:       strings.ToValidUTF8(string(kept), string(utf8.RuneError)),
		Truncated:  len(kept) < len(raw),
		LineBytes:  len(raw),
		EventID:    eventID,
		ActorID:    p.ActorID,
		SourceType: p.SourceType,
		PolicyRev:  pol.rev,
		ReceivedAt: receivedAt,
	}
	v, err := json.Marshal(doc)
	if err != nil {
		panic("BUG: quarantine document does not encode: " + err.Error())
	}
	return v
}

// headers returns the record headers of p's records; reason is set on
// quarantine records.
func (g *Gateway) headers(pol *policy, p *Principal, reason event.Reason) []kgo.RecordHeader {
	h := []kgo.RecordHeader{
		{Key: event.HeaderActorID, Value: []byte(p.ActorID)},
		{Key: event.HeaderSourceType, Value: []byte(p.SourceType)},
		{Key: event.HeaderPolicyRev, Value: []byte(pol.rev)},
	}
	if reason != "" {
		h = append(h, kgo.RecordHeader{Key: event.HeaderReason, Value: []byte(reason)})
	}
	return h
}
