// Package actions measures operator actions end to end (bench/actions/
// README.md): actions accepted per second by the query API with their
// latency, and the time from an action's answer to its effect in
// drift_evidence, over an in-process broker (kfake), a real ClickHouse
// and a joiner.
package actions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
	"github.com/driftline/driftline/pipeline/stream"
	"github.com/driftline/driftline/pipeline/stream/streamtest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// EnvBench runs TestActionFigures (it takes a minute and prints figures).
const EnvBench = "DRIFTLINE_BENCH_ACTIONS"

// dropTables drops every table of the bench's database, with ten minutes
// for all, and logs how long it took.
func dropTables(t *testing.T, db driver.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	rows, err := db.Query(ctx, "SELECT name FROM system.tables WHERE database = currentDatabase()")
	if err != nil {
		t.Errorf("list tables: %v", err)
		return
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Errorf("list tables: %v", err)
		}
		names = append(names, n)
	}
	rows.Close()
	for _, n := range names {
		if err := db.Exec(ctx, "DROP TABLE IF EXISTS `"+n+"`"); err != nil {
			t.Errorf("drop table %s: %v", n, err)
		}
	}
	t.Logf("dropped %d tables in %v", len(names), time.Since(start).Round(time.Millisecond))
}

func pct(ds []time.Duration, p float64) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

// TestActionFigures: DRIFTLINE_BENCH_ACTIONS=1 go test ./bench/actions -run TestActionFigures -v
func TestActionFigures(t *testing.T) {
	if os.Getenv(EnvBench) == "" {
		t.Skipf("set %s=1 to measure", EnvBench)
	}
	const findings, actions, clients, visible = 200, 4000, 8, 100
	env := streamtest.NewEnv(t, 4)
	// Runs after the joiner and the server stopped (defers run last
	// first): the bench's tables are dropped here, each with time to
	// spare. Thousands of accepts leave as many inactive part directories
	// (ClickHouse removes them after old_parts_lifetime, 8 minutes), and
	// on a loaded disk deleting them took the harness's one-minute DROP
	// DATABASE past its deadline.
	defer dropTables(t, env.CH)
	producer := testenv.KafkaClient(t, env.Brokers, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	opts := joiner.Options{StageOptions: stream.StageOptions{Brokers: env.Brokers, Group: "bench-actions", Topics: env.Names,
		Logger: slog.New(slog.DiscardHandler)}, Requests: producer}
	stop := streamtest.Start(t, "joiner", func(ctx context.Context) (*joiner.Joiner, error) {
		return joiner.New(ctx, opts, sink.NewClickHouse(env.CH))
	})
	defer stop()
	srv, err := api.New(api.Options{DB: env.CH, Commands: producer, Actions: reader.NewActionLog(env.CH), Topics: env.Names, Guard: testenv.LocalGuard(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	// Open stale findings: a record and a disagreeing observation each.
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	ids := make([]string, findings)
	for i := range findings {
		id := fmt.Sprintf("app-%04d", i)
		ids[i] = "stale_lifecycle_state:app_runtime/" + id
		recs = append(recs,
			streamtest.Event(t, env.Names, contract.TypePlatformRecord, "bench", uint64(2*i+1), at, contract.PlatformRecord{
				RecordType: "app", RecordID: "r-" + id, RecordVersion: 1, ResourceFamily: contract.FamilyAppRuntime,
				OwningDomain: "eu", Provider: contract.ProviderAppRuntime, ProviderID: id, ExpectedState: "running"}),
			streamtest.Event(t, env.Names, contract.TypeProviderObservation, "bench", uint64(2*i+2), at.Add(time.Second), contract.Observation{
				Provider: contract.ProviderAppRuntime, ProviderID: id, ResourceFamily: contract.FamilyAppRuntime, ObservedState: "stopped"}))
	}
	if err := env.Client.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testenv.CheckFor(t, time.Minute, func() error {
		var n uint64
		if err := env.CH.QueryRow(context.Background(), "SELECT count() FROM drift_evidence FINAL WHERE status = 'open'").Scan(&n); err != nil {
			return err
		}
		if n != findings {
			return fmt.Errorf("%d open findings", n)
		}
		return nil
	})

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var retries atomic.Int64
	// post sends one action as a client does: a 503 is retried with the
	// same key (counted); the latency covers the retries.
	post := func(id, key string, body any) (apitypes.ActionAccepted, time.Duration) {
		b, _ := json.Marshal(body)
		start := time.Now()
		for try := 0; ; try++ {
			req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1/findings/"+url.PathEscape(id)+"/actions", bytes.NewReader(b))
			req.Header.Set("Idempotency-Key", key)
			req.Header.Set("Authorization", "Bearer "+testenv.LocalKey)
			resp, err := hc.Do(req)
			if err != nil {
				t.Error(err)
				return apitypes.ActionAccepted{}, 0
			}
			var a apitypes.ActionAccepted
			code := resp.StatusCode
			derr := json.NewDecoder(resp.Body).Decode(&a)
			resp.Body.Close()
			if code == http.StatusServiceUnavailable && try < 5 {
				retries.Add(1)
				continue
			}
			if code != http.StatusAccepted || derr != nil {
				t.Errorf("action: %d", code)
			}
			return a, time.Since(start)
		}
	}

	// Accepted actions per second and their latency: clients in
	// parallel, each action a new key.
	lat := make([]time.Duration, actions)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			for i := c; i < actions; i += clients {
				_, lat[i] = post(ids[i%findings], fmt.Sprintf("bench-%d", i), map[string]string{"action": "assign", "reason": "bench", "assignee": fmt.Sprintf("ops-%d", i)})
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("accepted %d actions from %d clients in %v (%d 503s retried): %.0f actions/s; latency p50 %v p99 %v max %v",
		actions, clients, elapsed.Round(time.Millisecond), retries.Load(), float64(actions)/elapsed.Seconds(),
		pct(lat, 0.5).Round(10*time.Microsecond), pct(lat, 0.99).Round(10*time.Microsecond), pct(lat, 1).Round(10*time.Microsecond))

	// From the answer to the row: one action at a time, then poll the
	// finding until its last_action_id is the command's.
	vis := make([]time.Duration, visible)
	for i := range visible {
		id := ids[i%findings]
		a, _ := post(id, fmt.Sprintf("visible-%d", i), map[string]string{"action": "acknowledge", "reason": "bench"})
		answered := time.Now()
		for {
			var last string
			if err := env.CH.QueryRow(context.Background(), "SELECT argMax(last_action_id, version) FROM drift_evidence WHERE evidence_id = ?", id).Scan(&last); err != nil {
				t.Fatal(err)
			}
			if last == a.CommandID {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		vis[i] = time.Since(answered)
	}
	// What the accepts left to merge: answers and audit entries written
	// together share an INSERT (group commit), so a part holds many.
	for _, table := range []string{"action_commands", "audit_log"} {
		var parts, rows uint64
		if err := env.CH.QueryRow(context.Background(), `SELECT count(), sum(rows) FROM system.parts
			WHERE database = currentDatabase() AND table = ? AND active`, table).Scan(&parts, &rows); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d rows in %d active parts", table, rows, parts)
	}
	t.Logf("action to visible in drift_evidence (%d actions, joiner flush interval %v): p50 %v p99 %v max %v",
		visible, joiner.DefaultOptions().FlushInterval, pct(vis, 0.5).Round(time.Millisecond), pct(vis, 0.99).Round(time.Millisecond), pct(vis, 1).Round(time.Millisecond))
}
