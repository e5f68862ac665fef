package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/api/client"
	"github.com/driftline/driftline/pipeline/contract"
)

// controller plays the platform's controllers for make run, so that the
// loop of operator actions is visible end to end (docs/actions.md): it
// reads reconcile.requests and carries out about two requests in three
// (chosen by the request_id's hash) by reporting, through the ingest
// gateway, the observation that resolves the finding: the resource
// deleted for a cleanup, the expected state and version for the rest;
// their findings resolve and the requests show succeeded. It ignores the
// others, which stay pending until their deadline (event time) sends
// them to operator_review.
type controller struct {
	brokers          []string
	ingest, apiKey   string
	query            *client.Client
	out              io.Writer
	carried, ignored int
}

// ignores reports whether the controller leaves a request alone.
func ignores(requestID string) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(requestID))
	return h.Sum32()%3 == 0
}

// run consumes the requests until ctx ends.
func (c *controller) run(ctx context.Context) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...), kgo.ConsumerGroup("demo-controller"),
		kgo.ConsumeTopics(contract.TopicRequests), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		fmt.Fprintf(c.out, "controller: %v\n", err)
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			var req contract.Request
			if err := json.Unmarshal(r.Value, &req); err != nil {
				return
			}
			if ignores(req.RequestID) {
				c.ignored++
				fmt.Fprintf(c.out, "  controller: ignores %s %s (it goes to operator_review at its deadline)\n", req.Action, req.EvidenceID)
				return
			}
			if err := c.carryOut(ctx, req); err != nil {
				fmt.Fprintf(c.out, "  controller: %s %s: %v\n", req.Action, req.EvidenceID, err)
				return
			}
			c.carried++
			fmt.Fprintf(c.out, "  controller: carried out %s %s\n", req.Action, req.EvidenceID)
		})
	}
}

// carryOut reports the observation that resolves the finding of req.
func (c *controller) carryOut(ctx context.Context, req contract.Request) error {
	d, err := c.query.DriftDetail(ctx, req.EvidenceID)
	if err != nil {
		return err
	}
	f := d.Finding
	obs := contract.Observation{Provider: f.Provider, ProviderID: f.ProviderID, ResourceFamily: f.ResourceFamily,
		ObservedState: f.ExpectedState, ObservedVersion: f.ExpectedVersion, OwnerRef: f.RecordID}
	switch contract.Action(req.Action) {
	case contract.ActionCleanup:
		obs = contract.Observation{Provider: f.Provider, ProviderID: f.ProviderID, ResourceFamily: f.ResourceFamily, ObservedState: "deleted"}
	case contract.ActionQuarantineNode, contract.ActionReleaseNode:
		return nil // the node's scheduling changes; no observation resolves the finding
	}
	if obs.ResourceFamily == "" || obs.ObservedState == "" {
		return fmt.Errorf("finding %s has no state to restore", f.EvidenceID)
	}
	payload, _ := json.Marshal(obs)
	line, _ := json.Marshal(map[string]any{"event_id": "controller-" + req.RequestID, "event_type": contract.TypeProviderObservation,
		"schema_version": contract.SchemaVersion, "producer": "demo-controller", "occurred_at": time.Now().UTC().Format(time.RFC3339Nano),
		"correlation_id": req.CorrelationID, "environment": contract.EnvLocalParity, "payload": json.RawMessage(payload)})
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.ingest, "/")+"/v1/events", bytes.NewReader(append(line, '\n')))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/x-ndjson")
	hreq.Header.Set("Authorization", "Bearer "+c.apiKey)
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var receipt struct {
		Rejected int `json:"rejected"`
	}
	if resp.StatusCode/100 != 2 || json.Unmarshal(body, &receipt) != nil || receipt.Rejected != 0 {
		return fmt.Errorf("ingest: %s %s", resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// demoActions takes a few actions as an operator would, so that the
// controller has requests to carry out: retry on up to n stale findings
// and cleanup on up to n orphans.
func demoActions(ctx context.Context, out io.Writer, qc *client.Client, n int) {
	for _, a := range []struct {
		action, class string
	}{{string(contract.ActionRetry), string(contract.ClassStale)}, {string(contract.ActionCleanup), string(contract.ClassOrphan)}} {
		page, err := qc.Drift(ctx, map[string][]string{"classification": {a.class}, "limit": {fmt.Sprint(n)}})
		if err != nil {
			fmt.Fprintf(out, "  demo actions: %v\n", err)
			return
		}
		for _, f := range page.Findings {
			ans, err := qc.Act(ctx, f.EvidenceID, "demo-"+a.action+"-"+f.EvidenceID, client.ActionRequest{Action: a.action, Reason: "make run demo"})
			if err != nil {
				fmt.Fprintf(out, "  %s %s refused: %v\n", a.action, f.EvidenceID, err)
				continue
			}
			fmt.Fprintf(out, "  %s %s accepted (%s)\n", ans.Action, ans.EvidenceID, ans.CommandID)
		}
	}
}
