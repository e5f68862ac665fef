// Command naive is the baseline of the end-to-end benchmark (bench/harness):
// the drift joiner's job as a competent engineer writes it in a day, so
// that the real joiner's figures have something honest to be compared
// with on the same machine in the same run.
//
// It consumes the same three topics with its own consumer group (franz-go),
// decodes every record with encoding/json into plain structs, dedupes on
// event_id with a map[string]struct{}, joins observations to platform
// records with a map keyed by provider/provider_id, and writes finding
// transitions to ClickHouse in batched INSERTs (-insert.batch rows, or
// what accumulated in -insert.interval), committing offsets after each
// insert. With -insert.batch 1 it is the row-by-row first version (one
// INSERT per transition, offsets committed after each poll), labelled as
// such in the results. It classifies the simple cases the same way as the joiner (stale
// lifecycle state or version, orphan without a live owner, missing at a
// scan marker, route and owner-reference mismatch) without event-time
// windows, watermarks, grace periods or a deterministic merge of the three
// streams, and without quota or node-agent evidence; so its findings
// match the ground truth only roughly. It is a yardstick, not a joiner.
//
//	naive -brokers 127.0.0.1:19092 -group bench-naive -clickhouse.addr 127.0.0.1:19000 -db bench_naive -insert.batch 50000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
)

type envelope struct {
	EventID    string          `json:"event_id"`
	EventType  string          `json:"event_type"`
	Producer   string          `json:"producer"`
	Seq        int64           `json:"seq"`
	OccurredAt time.Time       `json:"occurred_at"`
	Payload    json.RawMessage `json:"payload"`
}

type record struct {
	RecordID        string `json:"record_id"`
	RecordVersion   int64  `json:"record_version"`
	Provider        string `json:"provider"`
	ProviderID      string `json:"provider_id"`
	ExpectedState   string `json:"expected_state"`
	ExpectedVersion string `json:"expected_version"`
	Deleted         bool   `json:"deleted"`
	RouteTarget     string `json:"route_target"`

	lastSeen  time.Time
	partition int32 // the records partition; co-partitioned with its observations
}

type observation struct {
	Provider        string `json:"provider"`
	ProviderID      string `json:"provider_id"`
	ObservedState   string `json:"observed_state"`
	ObservedVersion string `json:"observed_version"`
	OwnerRef        string `json:"owner_ref"`
	RouteTarget     string `json:"route_target"`
}

// seen is the last observation of an identity.
type seen struct {
	observation
	at        time.Time
	partition int32
}

type scan struct {
	Provider      string    `json:"provider"`
	ScanStartedAt time.Time `json:"scan_started_at"`
}

// row is one finding transition to write.
type row struct {
	eid, class, provider, id, status, observed, expected string
	at                                                   time.Time
	version                                              uint64
}

type naive struct {
	conn driver.Conn
	// insert writes rows with one INSERT; a test replaces it.
	insert func(ctx context.Context, rows []row) error
	// batch is how many rows are written at once (1: row by row) and
	// interval how long rows wait at most before they are.
	batch    int
	interval time.Duration
	pending  []row
	flushed  time.Time
	seen     map[string]struct{}
	records  map[string]*record
	observed map[string]*seen
	findings map[string]string // evidence id -> status
	version  uint64
}

func main() {
	brokers := flag.String("brokers", service.DefaultBrokers, "seed brokers")
	group := flag.String("group", "bench-naive", "consumer group")
	addr := flag.String("clickhouse.addr", service.DefaultClickHouseAddr, "ClickHouse native address")
	db := flag.String("db", "bench_naive", "ClickHouse database (created with its one table)")
	batch := flag.Int("insert.batch", 50000, "rows per INSERT; 1 writes row by row")
	interval := flag.Duration("insert.interval", time.Second, "write what accumulated at least this often")
	names := contract.DefaultTopics()
	names.RegisterFlags(flag.CommandLine)
	flag.Parse()
	log.SetPrefix("naive: ")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *batch < 1 {
		log.Fatalf("-insert.batch %d: must be at least 1", *batch)
	}
	if err := run(ctx, *brokers, *group, service.ClickHouse{Addr: *addr, Database: *db, User: "default"}, names, *batch, *interval); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, brokers, group string, chc service.ClickHouse, names contract.Topics, batch int, interval time.Duration) error {
	conn, err := readmodel.Open(ctx, chc)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS naive_findings (
		evidence_id String, classification String, provider String, provider_id String,
		status String, observed_state String, expected_state String, at DateTime, version UInt64)
		ENGINE = ReplacingMergeTree(version) ORDER BY evidence_id`); err != nil {
		return fmt.Errorf("create table: %w", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumerGroup(group), kgo.ConsumeTopics(names.Joined()...),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	n := newNaive(batch, interval)
	n.conn = conn
	n.insert = n.insertRows
	log.Printf("consuming %v as group %s, %d rows per insert", names.Joined(), group, batch)
	return n.consume(ctx, cl)
}

func newNaive(batch int, interval time.Duration) *naive {
	return &naive{batch: batch, interval: interval, flushed: time.Now(), seen: map[string]struct{}{}, records: map[string]*record{}, observed: map[string]*seen{}, findings: map[string]string{}}
}

// consume polls, applies and commits until ctx ends.
func (n *naive) consume(ctx context.Context, cl *kgo.Client) error {
	for ctx.Err() == nil {
		fetches := cl.PollRecords(ctx, 5000)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			break
		}
		fetches.EachError(func(t string, p int32, err error) { log.Printf("fetch %s/%d: %v", t, p, err) })
		var ferr error
		fetches.EachRecord(func(r *kgo.Record) {
			if ferr == nil {
				ferr = n.apply(ctx, r)
			}
		})
		if ferr != nil {
			return ferr
		}
		if len(n.pending) > 0 && time.Since(n.flushed) < n.interval {
			continue // commit only what is written
		}
		if err := n.flush(ctx); err != nil {
			return err
		}
		if err := cl.CommitUncommittedOffsets(context.WithoutCancel(ctx)); err != nil {
			log.Printf("commit: %v", err)
		}
	}
	return nil
}

// write queues one row, and writes the queue once it holds a batch.
func (n *naive) write(ctx context.Context, eid, class, provider, id, status, observed, expected string, at time.Time) error {
	n.version++
	n.pending = append(n.pending, row{eid, class, provider, id, status, observed, expected, at, n.version})
	if len(n.pending) >= n.batch {
		return n.flush(ctx)
	}
	return nil
}

// flush writes the queued rows in one INSERT.
func (n *naive) flush(ctx context.Context) error {
	n.flushed = time.Now()
	if len(n.pending) == 0 {
		return nil
	}
	if err := n.insert(ctx, n.pending); err != nil {
		return err
	}
	n.pending = n.pending[:0]
	return nil
}

func (n *naive) apply(ctx context.Context, r *kgo.Record) error {
	var env envelope
	if err := json.Unmarshal(r.Value, &env); err != nil {
		return nil // not an event: skip
	}
	// A scan marker is written to every partition under one event id, and
	// each copy covers its own partition.
	id := env.EventID
	if env.EventType == "provider.scan_completed" {
		id += "/" + strconv.Itoa(int(r.Partition))
	}
	if _, dup := n.seen[id]; dup {
		return nil
	}
	n.seen[id] = struct{}{}
	switch env.EventType {
	case "platform.record":
		var rec record
		if err := json.Unmarshal(env.Payload, &rec); err != nil {
			return nil
		}
		rec.partition = r.Partition
		key := rec.Provider + "/" + rec.ProviderID
		if old, ok := n.records[key]; ok {
			if old.RecordVersion > rec.RecordVersion {
				return nil
			}
			rec.lastSeen = old.lastSeen
		}
		n.records[key] = &rec
		// An observation that came before its record is judged now.
		if o := n.observed[key]; o != nil {
			return n.judge(ctx, &rec, &o.observation, o.at)
		}
	case "provider.observation":
		var o observation
		if err := json.Unmarshal(env.Payload, &o); err != nil {
			return nil
		}
		key := o.Provider + "/" + o.ProviderID
		n.observed[key] = &seen{observation: o, at: env.OccurredAt, partition: r.Partition}
		if rec := n.records[key]; rec != nil {
			rec.lastSeen = env.OccurredAt
			return n.judge(ctx, rec, &o, env.OccurredAt)
		}
	case "provider.scan_completed":
		var s scan
		if err := json.Unmarshal(env.Payload, &s); err != nil {
			return nil
		}
		for _, rec := range n.records {
			if rec.partition == r.Partition && rec.Provider == s.Provider && !rec.Deleted && live(rec.ExpectedState) && rec.lastSeen.Before(s.ScanStartedAt) {
				if err := n.open(ctx, string(contract.ClassMissing), rec.Provider, rec.ProviderID, "", rec.ExpectedState, env.OccurredAt); err != nil {
					return err
				}
			}
		}
		// Orphans: seen live in this scan with no live record.
		for key, o := range n.observed {
			if o.partition != r.Partition || o.Provider != s.Provider || o.at.Before(s.ScanStartedAt) || !live(o.ObservedState) {
				continue
			}
			if rec := n.records[key]; rec == nil || rec.Deleted || !live(rec.ExpectedState) {
				if err := n.open(ctx, string(contract.ClassOrphan), o.Provider, o.ProviderID, o.ObservedState, "", env.OccurredAt); err != nil {
					return err
				}
			}
		}
	default:
		var m map[string]any // telemetry: decoded and dropped
		_ = json.Unmarshal(env.Payload, &m)
	}
	return nil
}

func live(state string) bool {
	switch state {
	case "released", "deleted", "terminated", "stopped", "detached":
		return false
	}
	return true
}

// judge compares an observation with the record that owns it.
func (n *naive) judge(ctx context.Context, rec *record, o *observation, at time.Time) error {
	switch {
	case rec.Deleted || !live(rec.ExpectedState):
		return nil // an orphan if still seen live at the scan marker
	case o.ObservedState != rec.ExpectedState || (rec.ExpectedVersion != "" && o.ObservedVersion != "" && o.ObservedVersion != rec.ExpectedVersion):
		return n.open(ctx, string(contract.ClassStale), o.Provider, o.ProviderID, o.ObservedState, rec.ExpectedState, at)
	case rec.RouteTarget != "" && o.RouteTarget != "" && o.RouteTarget != rec.RouteTarget:
		return n.open(ctx, string(contract.ClassRoute), o.Provider, o.ProviderID, o.ObservedState, rec.ExpectedState, at)
	case o.OwnerRef != "" && o.OwnerRef != rec.RecordID:
		return n.open(ctx, string(contract.ClassIdentity), o.Provider, o.ProviderID, o.ObservedState, rec.ExpectedState, at)
	default:
		return n.resolve(ctx, string(contract.ClassStale), o.Provider, o.ProviderID, o.ObservedState, rec.ExpectedState, at)
	}
}

func (n *naive) open(ctx context.Context, class, provider, id, observed, expected string, at time.Time) error {
	eid := class + "/" + provider + "/" + id
	if n.findings[eid] == string(contract.StatusOpen) {
		return nil
	}
	n.findings[eid] = string(contract.StatusOpen)
	return n.write(ctx, eid, class, provider, id, string(contract.StatusOpen), observed, expected, at)
}

func (n *naive) resolve(ctx context.Context, class, provider, id, observed, expected string, at time.Time) error {
	eid := class + "/" + provider + "/" + id
	if n.findings[eid] != string(contract.StatusOpen) {
		return nil
	}
	n.findings[eid] = string(contract.StatusResolved)
	return n.write(ctx, eid, class, provider, id, string(contract.StatusResolved), observed, expected, at)
}

// insertRows writes rows with one INSERT.
func (n *naive) insertRows(ctx context.Context, rows []row) error {
	b, err := n.conn.PrepareBatch(ctx, `INSERT INTO naive_findings (evidence_id, classification, provider, provider_id, status, observed_state, expected_state, at, version)`)
	if err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	for _, r := range rows {
		if err := b.Append(r.eid, r.class, r.provider, r.id, r.status, r.observed, r.expected, r.at, r.version); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	return nil
}
