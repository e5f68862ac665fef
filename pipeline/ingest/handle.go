package ingest

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	json "github.com/segmentio/encoding/json"
)

// serveEvents handles POST /v1/events: authenticate, read the whole body,
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

	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
		return
	}
	principal, err := g.opts.Keys.Authenticate(bearer(r))
	if err != nil {
		g.m.authFailures.WithLabelValues(authKind(err)).Inc()
		g.log.Warn("ingest request refused", "err", err, "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="driftline-ingest"`)
		fail(http.StatusUnauthorized, "unauthorized", err.Error())
		return
	}

	select {
	case g.sem <- struct{}{}:
		defer func() { <-g.sem }()
	default:
		g.m.busy.Inc()
		g.setRetryAfter(w)
		fail(http.StatusServiceUnavailable, "busy", "too many requests in flight; retry later")
		return
	}
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

	b := g.prepare(principal, body)
	if len(b.lines) == 0 {
		fail(http.StatusBadRequest, "bad_request", "body holds no events: send one JSON envelope per line")
		return
	}
	if err := g.produce(r.Context(), b); err != nil {
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

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	rd := http.MaxBytesReader(w, r.Body, limit)
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= limit {
		buf.Grow(int(r.ContentLength))
	}
	_, err := buf.ReadFrom(rd)
	return buf.Bytes(), err
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
	case errors.Is(err, ErrMissingKey):
		return "missing"
	case errors.Is(err, ErrRevokedKey):
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
	writeJSON(w, ErrorResponse{Error: code, Message: msg, PolicyRev: g.policyRev})
}

func writeJSON(w http.ResponseWriter, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // receipts echo details, not HTML
	_ = enc.Encode(v)
}

// commit turns a written batch into the response, remembers accepted
// identities and counts.
func (g *Gateway) commit(b *batch) Response {
	resp := Response{PolicyRev: g.policyRev, Receipts: make([]Receipt, 0, len(b.lines))}
	ids := make([]string, 0, len(b.lines))
	for i := range b.lines {
		l := &b.lines[i]
		switch l.receipt.Status {
		case StatusAccepted:
			resp.Accepted++
			ids = append(ids, l.dedupeID)
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
