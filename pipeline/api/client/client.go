// Package client calls the query API over HTTP (package api serves it)
// and decodes its answers into the types of package apitypes.
package client

import (
	"bytes"
	"time"

	"github.com/driftline/driftline/pipeline/api/apitypes"

	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client calls the query API. The zero value is not usable: set BaseURL
// and APIKey.
type Client struct {
	BaseURL string       // e.g. "http://127.0.0.1:18081"
	APIKey  string       // sent as Authorization: Bearer <key>
	HTTP    *http.Client // default http.DefaultClient
}

// Session calls GET /v1/session: who the key is, its roles and scopes.
func (c *Client) Session(ctx context.Context) (*apitypes.Session, error) {
	return get[apitypes.Session](ctx, c, "/v1/session", nil)
}

// Audit calls GET /v1/audit with the filters in q (auditors).
func (c *Client) Audit(ctx context.Context, q url.Values) (*apitypes.AuditPage, error) {
	return get[apitypes.AuditPage](ctx, c, "/v1/audit", q)
}

// Status calls GET /v1/status.
func (c *Client) Status(ctx context.Context) (*apitypes.Status, error) {
	return get[apitypes.Status](ctx, c, "/v1/status", nil)
}

// Drift calls GET /v1/drift with the filters, limit and cursor in q; nil
// q lists open findings.
func (c *Client) Drift(ctx context.Context, q url.Values) (*apitypes.DriftPage, error) {
	return get[apitypes.DriftPage](ctx, c, "/v1/drift", q)
}

// DriftAll follows next_cursor from the first page of q to the last and
// returns every finding.
func (c *Client) DriftAll(ctx context.Context, q url.Values) ([]apitypes.Finding, error) {
	return all(ctx, q, c.Drift, func(p *apitypes.DriftPage) ([]apitypes.Finding, string) { return p.Findings, p.NextCursor })
}

// all follows next_cursor from the first page of q to the last and
// returns the items of every page; on an error, those read so far.
func all[P, T any](ctx context.Context, q url.Values, page func(context.Context, url.Values) (*P, error), items func(*P) ([]T, string)) ([]T, error) {
	q = cloneValues(q)
	var out []T
	for {
		p, err := page(ctx, q)
		if err != nil {
			return out, err
		}
		got, next := items(p)
		out = append(out, got...)
		if next == "" {
			return out, nil
		}
		q.Set("cursor", next)
	}
}

// DriftDetail calls GET /v1/drift/{evidence_id}. An unknown id returns an
// error matching ErrNotFound.
func (c *Client) DriftDetail(ctx context.Context, evidenceID string) (*apitypes.DriftDetail, error) {
	return get[apitypes.DriftDetail](ctx, c, "/v1/drift/"+url.PathEscape(evidenceID), nil)
}

// Heatmap calls GET /v1/heatmap with the filters in q.
func (c *Client) Heatmap(ctx context.Context, q url.Values) (*apitypes.Heatmap, error) {
	return get[apitypes.Heatmap](ctx, c, "/v1/heatmap", q)
}

// get calls GET path with q and decodes the answer; the value is
// returned on an error too.
func get[T any](ctx context.Context, c *Client, path string, q url.Values) (*T, error) {
	v := new(T)
	return v, c.get(ctx, path, q, v)
}

func (c *Client) get(ctx context.Context, path string, q url.Values, into any) error {
	return c.do(ctx, http.MethodGet, path, q, "", nil, into)
}

// do sends one request (with an Idempotency-Key when key is set) and
// decodes a 2xx answer into into; any other answer is an *APIError.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, key string, body io.Reader, into any) error {
	u := strings.TrimSuffix(c.BaseURL, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("query api: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("query api: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		ae := &APIError{StatusCode: resp.StatusCode}
		if json.Unmarshal(raw, &ae.Body) != nil || ae.Body.Error == "" {
			ae.Body = apitypes.ErrorBody{Error: strings.TrimSpace(string(raw))}
		}
		return ae
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		return fmt.Errorf("query api: decode %s: %w", path, err)
	}
	return nil
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// Nodes calls GET /v1/nodes with the filters, sort, limit and cursor in q.
func (c *Client) Nodes(ctx context.Context, q url.Values) (*apitypes.NodePage, error) {
	return get[apitypes.NodePage](ctx, c, "/v1/nodes", q)
}

// NodesAll follows next_cursor from the first page of q to the last.
func (c *Client) NodesAll(ctx context.Context, q url.Values) ([]apitypes.Node, error) {
	return all(ctx, q, c.Nodes, func(p *apitypes.NodePage) ([]apitypes.Node, string) { return p.Nodes, p.NextCursor })
}

// Node calls GET /v1/nodes/{node_id}. An unknown node returns an error
// matching ErrNotFound.
func (c *Client) Node(ctx context.Context, nodeID string) (*apitypes.NodeDetail, error) {
	return get[apitypes.NodeDetail](ctx, c, "/v1/nodes/"+url.PathEscape(nodeID), nil)
}

// Connectivity calls GET /v1/connectivity with the filters in q.
func (c *Client) Connectivity(ctx context.Context, q url.Values) (*apitypes.Connectivity, error) {
	return get[apitypes.Connectivity](ctx, c, "/v1/connectivity", q)
}

// Attention calls GET /v1/attention with n, by, kind and filters in q.
func (c *Client) Attention(ctx context.Context, q url.Values) (*apitypes.Attention, error) {
	return get[apitypes.Attention](ctx, c, "/v1/attention", q)
}

// BillingMismatches calls GET /v1/billing/mismatches (JSON) with the
// filters, sort, limit and cursor in q.
func (c *Client) BillingMismatches(ctx context.Context, q url.Values) (*apitypes.BillingPage, error) {
	return get[apitypes.BillingPage](ctx, c, "/v1/billing/mismatches", q)
}

// Rated calls GET /v1/billing/rated with group_by and the filters in q.
func (c *Client) Rated(ctx context.Context, q url.Values) (*apitypes.RatedTotals, error) {
	return get[apitypes.RatedTotals](ctx, c, "/v1/billing/rated", q)
}

// Automation calls GET /v1/billing/automation with tenant_id (required)
// and product_id in q.
func (c *Client) Automation(ctx context.Context, q url.Values) (*apitypes.Automation, error) {
	return get[apitypes.Automation](ctx, c, "/v1/billing/automation", q)
}

// ActionRequest is the body of an action (CONTRACT section 9.2).
type ActionRequest struct {
	Action   string    `json:"action"`
	Reason   string    `json:"reason"`
	Assignee string    `json:"assignee,omitempty"`
	Until    time.Time `json:"until,omitzero"`
	// Preview (batch only) answers what the batch would touch, writing
	// nothing.
	Preview bool `json:"preview,omitempty"`
}

// Act calls POST /v1/findings/{evidence_id}/actions with the
// Idempotency-Key key. A refusal is an *APIError whose Body.Reason names
// it.
func (c *Client) Act(ctx context.Context, evidenceID, key string, a ActionRequest) (*apitypes.ActionAccepted, error) {
	v := new(apitypes.ActionAccepted)
	return v, c.post(ctx, "/v1/findings/"+url.PathEscape(evidenceID)+"/actions", nil, key, a, v)
}

// ActBatch calls POST /v1/actions/batch with the drift filters in q and
// the Idempotency-Key key ("" for a preview).
func (c *Client) ActBatch(ctx context.Context, q url.Values, key string, a ActionRequest) (*apitypes.BatchAccepted, error) {
	v := new(apitypes.BatchAccepted)
	return v, c.post(ctx, "/v1/actions/batch", q, key, a, v)
}

func (c *Client) post(ctx context.Context, path string, q url.Values, key string, body, into any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("query api: %w", err)
	}
	return c.do(ctx, http.MethodPost, path, q, key, bytes.NewReader(b), into)
}

// Timeline calls GET /v1/nodes/{node_id}/timeline with limit in q.
func (c *Client) Timeline(ctx context.Context, nodeID string, q url.Values) (*apitypes.Timeline, error) {
	return get[apitypes.Timeline](ctx, c, "/v1/nodes/"+url.PathEscape(nodeID)+"/timeline", q)
}

// Rollouts calls GET /v1/rollouts with the filters in q.
func (c *Client) Rollouts(ctx context.Context, q url.Values) (*apitypes.Rollouts, error) {
	return get[apitypes.Rollouts](ctx, c, "/v1/rollouts", q)
}

// Relays calls GET /v1/relays with the filters in q.
func (c *Client) Relays(ctx context.Context, q url.Values) (*apitypes.Relays, error) {
	return get[apitypes.Relays](ctx, c, "/v1/relays", q)
}

// SyncDebt calls GET /v1/syncdebt with the filters, from, to and limit in
// q.
func (c *Client) SyncDebt(ctx context.Context, q url.Values) (*apitypes.SyncDebt, error) {
	return get[apitypes.SyncDebt](ctx, c, "/v1/syncdebt", q)
}
