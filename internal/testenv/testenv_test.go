package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
	"github.com/driftline/driftline/pipeline/stream/topics"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestClickHouse(t *testing.T) {
	var first service.ClickHouse
	t.Run("use", func(t *testing.T) {
		first = testenv.ClickHouse(t)
		second := testenv.ClickHouse(t)
		if first.Database == second.Database || first.Addr != second.Addr {
			t.Fatalf("two databases %+v and %+v: want distinct names on one server", first, second)
		}
		ctx := context.Background()
		conn := testenv.Open(t, first, readmodel.NoCreate())
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM drift_evidence FINAL").Scan(&n); err != nil {
			t.Fatalf("database is not migrated: %v", err)
		}
	})
	// The passing subtest's databases are gone.
	conn := testenv.Open(t, service.ClickHouse{Addr: first.Addr, Database: "default"}, readmodel.NoCreate())
	var n uint64
	if err := conn.QueryRow(context.Background(), "SELECT count() FROM system.databases WHERE name = ?", first.Database).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database %s not dropped after its test passed", first.Database)
	}
}

func TestKafka(t *testing.T) {
	brokers, names := testenv.Kafka(t, 3)
	cl := testenv.KafkaClient(t, brokers, kgo.ConsumeTopics(names.Usage))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	if err := topics.CheckCopartitioned(ctx, adm, names); err != nil {
		t.Fatal(err)
	}
	if n, err := topics.PartitionCount(ctx, adm, names.Quarantine); err != nil || n != 3 {
		t.Fatalf("quarantine partitions = %d, %v; want 3", n, err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: names.Usage, Key: []byte("gw/1"), Value: []byte("{}")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if got := fs.Records(); len(got) != 1 || string(got[0].Key) != "gw/1" {
		t.Fatalf("consumed %v, want the produced record", got)
	}
}

// TestReadTopics: every record of every partition is read, in offset
// order per partition, even when polls time out before the first fetch
// (an idle of a millisecond); an empty topic is read as empty at once.
func TestReadTopics(t *testing.T) {
	brokers, names := testenv.Kafka(t, 3)
	cl := testenv.KafkaClient(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 300
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: names.Usage, Key: []byte(fmt.Sprintf("gw/%d", i)), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := testenv.ReadTopics(t, ctx, brokers, time.Millisecond, names.Usage, names.Quarantine)
	if len(got[names.Usage]) != n || len(got[names.Quarantine]) != 0 {
		t.Fatalf("read %d records of %s and %d of %s, want %d and 0", len(got[names.Usage]), names.Usage, len(got[names.Quarantine]), names.Quarantine, n)
	}
	seen := map[string]bool{}
	next := map[int32]int64{}
	for _, r := range got[names.Usage] {
		if r.Offset != next[r.Partition] {
			t.Fatalf("%s/%d: offset %d, want %d", r.Topic, r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
		seen[string(r.Value)] = true
	}
	if len(seen) != n || len(next) < 2 {
		t.Fatalf("%d distinct records over %d partitions", len(seen), len(next))
	}
	start := time.Now()
	if got := testenv.ReadTopics(t, ctx, brokers, 200*time.Millisecond, names.Rated); len(got) != 0 || time.Since(start) > 10*time.Second {
		t.Fatalf("an empty topic: %d topics read in %v", len(got), time.Since(start))
	}
}

// TestClickHouseConn: the connection is to the new database.
func TestClickHouseConn(t *testing.T) {
	conn, cfg := testenv.ClickHouseConn(t)
	var db string
	if err := conn.QueryRow(context.Background(), "SELECT currentDatabase()").Scan(&db); err != nil || db != cfg.Database {
		t.Fatalf("current database %q, %v; want %s", db, err, cfg.Database)
	}
}

func TestKafkaCluster(t *testing.T) {
	c, names := testenv.KafkaCluster(t, 2)
	adm := kadm.NewClient(testenv.KafkaClient(t, c.ListenAddrs()))
	if n, err := topics.PartitionCount(context.Background(), adm, names.Observations); err != nil || n != 2 {
		t.Fatalf("observations partitions = %d, %v; want 2", n, err)
	}
}

func TestCheckFor(t *testing.T) {
	calls := 0
	testenv.CheckFor(t, 5*time.Second, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("CheckFor called f %d times, want 3", calls)
	}
}

// recorder is a testing.TB that records how a test ended.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Skipf(format string, a ...any)  { r.skipped = fmt.Sprintf(format, a...) }
func (r *recorder) Fatalf(format string, a ...any) { r.failed = fmt.Sprintf(format, a...) }

// TestUnavailable: a missing component skips a test outside CI and fails
// it under CI.
func TestUnavailable(t *testing.T) {
	for _, c := range []struct {
		ci         string
		wantFailed bool
	}{{"", false}, {"false", false}, {"true", true}, {"1", true}} {
		t.Setenv(testenv.EnvCI, c.ci)
		r := &recorder{}
		testenv.Unavailable(r, "no %s", "chromium")
		if got := r.failed != ""; got != c.wantFailed || (r.skipped != "") == c.wantFailed {
			t.Errorf("CI=%q: skipped %q, failed %q", c.ci, r.skipped, r.failed)
		}
		if !strings.HasPrefix(r.skipped+r.failed, "no chromium") {
			t.Errorf("CI=%q: the reason is lost: %q", c.ci, r.skipped+r.failed)
		}
	}
}
