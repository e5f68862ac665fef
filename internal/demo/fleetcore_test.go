package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/pipeline/api/client"
	"github.com/driftline/driftline/pipeline/contract"
)

// TestPrintFleetCore serves the truth's own figures as the query API
// would and checks the summary shows each beside the truth, and the
// reader follows the node pages.
func TestPrintFleetCore(t *testing.T) {
	cfg := fleet.DefaultConfig()
	cfg.Core.BadInput = true
	g, err := fleet.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	truth := g.Truth()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/v1/nodes":
			type node struct {
				Phase string `json:"phase"`
			}
			var nodes []node
			for _, n := range truth.Fleet.Nodes {
				nodes = append(nodes, node{n.Phase})
			}
			half := len(nodes) / 2
			if r.URL.Query().Get("cursor") == "" {
				_ = json.NewEncoder(w).Encode(map[string]any{"nodes": nodes[:half], "next_cursor": "c2"})
			} else {
				_ = json.NewEncoder(w).Encode(map[string]any{"nodes": nodes[half:]})
			}
		case "/v1/rollouts":
			var rs []map[string]any
			for b, s := range truthRollouts(truth) {
				rs = append(rs, map[string]any{"policy_bundle_id": b, "target_version": s.TargetVersion, "at_target": s.AtTarget,
					"updating": s.Updating, "behind": s.Behind, "failed": s.Failed, "pending": s.Pending})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"rollouts": rs})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	var out bytes.Buffer
	printFleetCore(context.Background(), &out, apiFleetCore{&client.Client{BaseURL: srv.URL, APIKey: "k"}}, truth)
	s := out.String()
	for p, n := range truth.Fleet.Phases {
		if !strings.Contains(s, p) {
			t.Errorf("phase %s (%d nodes) missing:\n%s", p, n, s)
		}
	}
	if !strings.Contains(s, "pb-rollout") || strings.Contains(s, "unknown (") {
		t.Errorf("summary:\n%s", s)
	}
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), string(contract.PhaseActive)+" ") {
			f := strings.Fields(line)
			if len(f) != 3 || f[1] != f[2] {
				t.Errorf("ACTIVE line %q: the API's count should equal the truth's", line)
			}
		}
	}
	for _, r := range truth.Fleet.Rejections {
		if !strings.Contains(s, r.Reason) {
			t.Errorf("rejection %s not shown:\n%s", r.Reason, s)
		}
	}
	t.Log(s)
}
