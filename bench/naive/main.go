// Command naive is the baseline of the end-to-end benchmark (bench/harness):
// the drift joiner's job written the obvious way, so that the real
// joiner's figures have something to be compared with on the same machine
// in the same run.
//
// It consumes the same three topics with its own consumer group, decodes
// every record with encoding/json into plain structs, dedupes on event_id
// with a map[string]struct{}, joins observations to platform records with
// a map keyed by provider/provider_id, and writes each finding transition
// to ClickHouse with one INSERT per row, committing offsets after each
// poll. It classifies the simple cases the same way as the joiner (stale
// lifecycle state or version, orphan without a live owner, missing at a
// scan marker, route and owner-reference mismatch) without event-time
// windows, watermarks, grace periods or a deterministic merge of the three
// streams, and without quota or node-agent evidence; so its findings
// match the ground truth only roughly. It is a yardstick, not a joiner.
//
//	naive -brokers 127.0.0.1:19092 -group bench-naive -clickhouse.addr 127.0.0.1:19000 -db bench_naive
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

type naive struct {
	conn driver.Conn
	// write stores one finding row; insert (one INSERT per row) unless a
	// test replaces it.
	write    func(ctx context.Context, eid, class, provider, id, status, observed, expected string, at time.Time) error
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
	names := contract.DefaultTopics()
	names.RegisterFlags(flag.CommandLine)
	flag.Parse()
	log.SetPrefix("naive: ")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *brokers, *group, service.ClickHouse{Addr: *addr, Database: *db, User: "default"}, names); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, brokers, group string, chc service.ClickHouse, names contract.Topics) error {
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
	n := newNaive()
	n.conn = conn
	n.write = n.insert
	log.Printf("consuming %v as group %s", names.Joined(), group)
	return n.consume(ctx, cl)
}

func newNaive() *naive {
	return &naive{seen: map[string]struct{}{}, records: map[string]*record{}, observed: map[string]*seen{}, findings: map[string]string{}}
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
		if err := cl.CommitUncommittedOffsets(context.WithoutCancel(ctx)); err != nil {
			log.Printf("commit: %v", err)
		}
	}
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

// insert writes one row with one INSERT, as a first version would.
func (n *naive) insert(ctx context.Context, eid, class, provider, id, status, observed, expected string, at time.Time) error {
	n.version++
	b, err := n.conn.PrepareBatch(ctx, `INSERT INTO naive_findings (evidence_id, classification, provider, provider_id, status, observed_state, expected_state, at, version)`)
	if err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	if err := b.Append(eid, class, provider, id, status, observed, expected, at, n.version); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	return nil
}
