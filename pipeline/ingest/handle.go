package ingest

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/pipeline/contract/keys"
)

// serveEvents handles POST /v1/events: admit (not draining, a free
// in-flight slot and body budget), authenticate, read the whole body,
// validate and authorise each line, produce every record in line order,
// wait for all acknowledgements, answer.
func (g *Gateway) serveEvents(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	code := http.StatusOK
	defer func() {
		g.m.requests.WithLabelValues(strconv.Itoa(code)).Observe(time.Since(start).Seconds())
	}()
	fail := func(status int, errCode, msg string) {
		code = status
		g.writeError(w, status, errCode, msg)
	}
	busy := func(counter prometheus.Counter, errCode, msg string) {
		counter.Inc()
		g.setRetryAfter(w)
		fail(http.StatusServiceUnavailable, errCode, msg)
	}

	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
		return
	}
	if g.draining.Load() {
		busy(g.m.draining, "shutting_down", "this gateway is shutting down; retry (another gateway, or this one after restart)")
		return
	}
	// Admitted requests are awaited by Close, so nothing accepted is cut
	// off by a shutdown.
	g.handlers.Add(1)
	defer g.handlers.Done()

	pol := g.pol.Load() // one policy for the whole request
	principal, err := g.authenticate(r, pol)
	if err != nil {
		g.m.authFailures.WithLabelValues(authKind(err)).Inc()
		attrs := []any{"event", "auth_refused", "kind", authKind(err), "err", err.Error(), "remote", r.RemoteAddr, "policy_rev", pol.rev}
		if principal != nil { // revoked: name who it was
			attrs = append(attrs, "actor_id", principal.ActorID, "key_id", principal.KeyID)
		}
		g.audit.Warn("ingest request refused", attrs...)
		if !g.opts.ClientCertAuth {
			w.Header().Set("WWW-Authenticate", `Bearer realm="driftline-ingest"`)
		}
		fail(http.StatusUnauthorized, "unauthorized", err.Error())
		return
	}

	select {
	case g.sem <- struct{}{}:
		defer func() { <-g.sem }()
	default:
		busy(g.m.busy, "busy", "too many requests in flight; retry later")
		return
	}
	reserve := g.opts.MaxBodyBytes
	if r.ContentLength >= 0 && r.ContentLength < reserve {
		reserve = r.ContentLength
	}
	if g.inflightBytes.Add(reserve) > g.opts.MaxInflightBytes {
		g.inflightBytes.Add(-reserve)
		busy(g.m.busy, "busy", "too many request bytes in flight; retry later")
		return
	}
	defer g.inflightBytes.Add(-reserve)
	g.m.inflight.Inc()
	defer g.m.inflight.Dec()

	body, err := readBody(w, r, g.opts.MaxBodyBytes)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			g.m.bodyTooLarge.Inc()
			fail(http.StatusRequestEntityTooLarge, "body_too_large", "request body exceeds "+strconv.FormatInt(g.opts.MaxBodyBytes, 10)+" bytes; split it into smaller requests")
			return
		}
		fail(http.StatusBadRequest, "bad_request", "read body: "+err.Error())
		return
	}
	pooled := true
	defer func() {
		if pooled {
			putBody(body)
		}
	}()
	if n := bytes.Count(body, []byte{'\n'}); n > g.opts.MaxLines {
		g.m.bodyTooLarge.Inc()
		fail(http.StatusRequestEntityTooLarge, "body_too_large", "request has "+strconv.Itoa(n)+" lines, limit "+strconv.Itoa(g.opts.MaxLines)+"; split it into smaller requests")
		return
	}

	b := g.prepare(pol, principal, body)
	if len(b.lines) == 0 {
		fail(http.StatusBadRequest, "bad_request", "body holds no events: send one JSON envelope per line")
		return
	}
	if err := g.produce(r.Context(), b); err != nil {
		// Records that timed out may still sit in the producer,
		// pointing into the body: leave it to the garbage collector.
		pooled = !errors.Is(err, errAckTimeout)
		g.m.unavailable.Inc()
		g.log.Warn("ingest request not written", "err", err, "actor_id", principal.ActorID, "lines", len(b.lines))
		g.setRetryAfter(w)
		fail(http.StatusServiceUnavailable, "unavailable", "the broker did not take the write; nothing in this request was accepted, retry it: "+err.Error())
		return
	}
	resp := g.commit(b)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	writeJSON(w, resp)
}

// authenticate returns the caller's principal under pol: from the verified
// client certificate in mTLS mode, else from the bearer API key. On a
// revoked identity it returns the principal with the error, for the audit.
func (g *Gateway) authenticate(r *http.Request, pol *policy) (*keys.Principal, error) {
	if g.opts.ClientCertAuth {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
			return nil, keys.ErrMissingCert
		}
		return pol.keys.AuthenticateCert(r.TLS.VerifiedChains[0][0])
	}
	return pol.keys.Authenticate(bearer(r))
}

// bodyPool recycles request body buffers: at a thousand events a request
// they are the largest allocation of the hot path. Buffers above
// maxPooledBody are left to the garbage collector so one huge request does
// not pin its memory.
var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBody = 4 << 20

// readBody reads the whole body (at most limit bytes) into a pooled
// buffer; give it back with putBody once nothing refers to it.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	rd := http.MaxBytesReader(w, r.Body, limit)
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	if r.ContentLength > 0 && r.ContentLength <= limit {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(rd)
	return buf.Bytes(), err
}

func putBody(b []byte) {
	if cap(b) > maxPooledBody {
		return
	}
	bodyPool.Put(bytes.NewBuffer(b[:0]))
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(key)
}

func authKind(err error) string {
	switch {
	case errors.Is(err, keys.ErrMissingKey), errors.Is(err, keys.ErrMissingCert):
		return "missing"
	case errors.Is(err, keys.ErrRevokedKey), errors.Is(err, keys.ErrRevokedCert):
		return "revoked"
	}
	return "unknown"
}

func (g *Gateway) setRetryAfter(w http.ResponseWriter) {
	secs := int(g.opts.RetryAfter.Round(time.Second) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
}

func (g *Gateway) writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	writeJSON(w, ErrorResponse{Error: code, Message: msg, PolicyRev: g.PolicyRev()})
}

func writeJSON(w http.ResponseWriter, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // receipts echo details, not HTML
	_ = enc.Encode(v)
}

// commit turns a written batch into the response, remembers accepted
// identities and counts.
func (g *Gateway) commit(b *batch) Response {
	resp := Response{PolicyRev: b.pol.rev, Receipts: make([]Receipt, 0, len(b.lines))}
	ids := make([]recent, 0, len(b.lines))
	for i := range b.lines {
		l := &b.lines[i]
		switch l.receipt.Status {
		case StatusAccepted:
			resp.Accepted++
			ids = append(ids, recent{l.dedupeID, l.digest})
			g.m.accepted.WithLabelValues(l.topic).Inc()
		case StatusDuplicate:
			resp.Duplicate++
			g.m.duplicates.Inc()
		case StatusRejected:
			resp.Rejected++
			g.m.rejected.WithLabelValues(string(l.receipt.Reason)).Inc()
		}
		resp.Receipts = append(resp.Receipts, l.receipt)
	}
	g.recent.add(ids...)
	return resp
}
