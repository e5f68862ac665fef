package ingest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
)

// TestAcceptedAcrossBrokerLoss feeds the gateway on three brokers whose
// topics have replication 3 and min.insync.replicas 2, and stops a broker
// twice mid-stream (the leader of an observations partition each time).
// Every accepted event is in its topic, and without a retried request
// none is there twice: acks=all and idempotent writes follow the leaders
// that move.
func TestAcceptedAcrossBrokerLoss(t *testing.T) {
	c, names := testenv.KafkaReplicated(t, testPartitions, 3)
	gw, err := New(Options{Environment: contract.EnvLocalParity, Brokers: c.ListenAddrs(), Topics: names,
		Keys: testKeyring(t), ProduceTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = gw.Close(ctx)
	}()
	e := &testEnv{t: t, cluster: c, gw: gw, srv: srv, names: names}

	const requests, perRequest = 15, 40
	retried := 0
	for r := range requests {
		switch r {
		case 5, 10:
			node := c.LeaderFor(names.Observations, int32(r/5))
			if err := c.RemoveNode(node); err != nil {
				t.Fatal(err)
			}
			t.Logf("stopped broker %d before request %d", node, r)
		}
		lines := observations(t, fmt.Sprintf("r%02d", r), perRequest)
		for attempt := 0; ; attempt++ {
			resp, err := e.post(fleetKey, lines...)
			if err == nil {
				if resp.Accepted+resp.Duplicate != perRequest {
					t.Fatalf("request %d: %+v", r, resp)
				}
				break
			}
			if attempt == 5 {
				t.Fatalf("request %d: %v", r, err)
			}
			retried++
			time.Sleep(200 * time.Millisecond) // a producer retries a 503
		}
	}
	recs := e.read(names.Observations, requests*perRequest)
	seen := map[string]int{}
	for _, rec := range recs {
		var env struct {
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal(rec.Value, &env); err != nil {
			t.Fatal(err)
		}
		seen[env.EventID]++
	}
	if len(seen) != requests*perRequest {
		t.Fatalf("%d distinct events in %s, want %d", len(seen), names.Observations, requests*perRequest)
	}
	if retried == 0 && len(recs) != len(seen) {
		t.Fatalf("%d records for %d events without a retried request", len(recs), len(seen))
	}
	t.Logf("%d events, %d records, %d retried requests", len(seen), len(recs), retried)
}
