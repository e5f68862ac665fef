package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/driftline/driftline/pipeline/api/access"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

type requestIDKey struct{}

// newRequestID returns 16 random hex digits.
func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// requestID returns the id admit gave r.
func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey{}).(string)
	return id
}

// admit names the request, authenticates and authorises it for endpoint,
// and returns it with its principal, tenant scope and audit context; a
// refused request is answered (401 or 403) and audited, and ok is false.
// An audited endpoint's entry is written before the handler runs, and a
// request whose entry cannot be written is refused (503): nothing is
// served unaudited.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, endpoint string, rule access.Rule) (*http.Request, bool) {
	id := newRequestID()
	w.Header().Set(access.HeaderRequestID, id)
	ctx := context.WithValue(r.Context(), requestIDKey{}, id)
	r = r.WithContext(ctx)
	p, err := s.opts.Guard.Authenticate(r)
	w.Header().Set(access.HeaderPolicyRev, p.PolicyRev)
	if rule.Public {
		return r, true
	}
	entry := access.Entry{ActorID: p.ActorID, Roles: p.Roles, TenantIDs: p.TenantIDs, RequestID: id, Method: r.Method,
		Target: r.URL.RequestURI(), Endpoint: endpoint, Remote: r.RemoteAddr, KeyID: p.KeyID, PolicyRev: p.PolicyRev}
	deny := func(code int, msg string) (*http.Request, bool) {
		s.metrics.denied.WithLabelValues(itoa(code)).Inc()
		entry.Result, entry.Status, entry.Reason = access.ResultDenied, code, msg
		s.auditor.Enqueue(entry)
		if code == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="driftline"`)
		}
		writeJSON(w, code, apitypes.ErrorBody{Error: msg, RequestID: id})
		return nil, false
	}
	if err != nil {
		return deny(http.StatusUnauthorized, err.Error())
	}
	if !access.Allowed(p, endpoint) {
		need := access.RuleOf(endpoint).Roles
		return deny(http.StatusForbidden, "forbidden: "+endpoint+" needs the role "+strings.Join(need, " or ")+
			"; this key has "+rolesText(p.Roles))
	}
	ctx = access.WithPrincipal(ctx, p)
	ctx = access.WithRequest(ctx, s.auditor, entry)
	if tenants, ok := p.TenantScope(); ok {
		ctx = reader.WithTenantScope(ctx, tenants)
	}
	r = r.WithContext(ctx)
	if rule.Audited {
		if err := s.auditRead(r); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, apitypes.ErrorBody{Error: err.Error(), RequestID: id})
			return nil, false
		}
	}
	return r, true
}

// errAuditUnavailable answers a read or action whose audit entry could
// not be written.
var errAuditUnavailable = errors.New("the audit log cannot be written, and this request is served only audited; retry later")

// auditRead writes the allowed entry of r (an evidence-bundle or export
// read, an action, an audit read) before anything is served.
func (s *Server) auditRead(r *http.Request) error {
	if err := access.Record(r.Context(), access.Entry{Result: access.ResultAllowed, Status: http.StatusOK}); err != nil {
		s.opts.Logger.Error("audit entry not written; request refused", "request_id", requestID(r), "url", r.URL.String(), "err", err)
		return errAuditUnavailable
	}
	return nil
}

func rolesText(roles []string) string {
	if len(roles) == 0 {
		return "no role"
	}
	return strings.Join(roles, ", ")
}

func itoa(code int) string {
	switch code {
	case http.StatusUnauthorized:
		return "401"
	case http.StatusForbidden:
		return "403"
	}
	return "other"
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) error {
	if err := allowOnly(r.URL.Query()); err != nil {
		return err
	}
	p, _ := access.FromContext(r.Context())
	writeJSON(w, http.StatusOK, apitypes.Session{ActorID: p.ActorID, Roles: nonNilStrings(p.Roles), TenantIDs: p.TenantIDs,
		AuthorityLevels: p.AuthorityLevels, Endpoints: nonNilStrings(access.Endpoints(p)), PolicyRev: p.PolicyRev,
		Environment: s.opts.Guard.Environment()})
	return nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
