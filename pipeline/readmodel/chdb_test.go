package readmodel_test

import (
	"context"
	"errors"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/readmodel"
	"github.com/driftline/driftline/pipeline/service"
	chschema "github.com/driftline/driftline/schema/clickhouse"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func open(t *testing.T, cfg service.ClickHouse) driver.Conn {
	t.Helper()
	return testenv.Open(t, cfg)
}

func count(t *testing.T, conn driver.Conn, q string, args ...any) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestMigrate applies every migration of schema/clickhouse (testenv does
// so) and checks that running them again changes nothing.
func TestMigrate(t *testing.T) {
	cfg := testenv.ClickHouse(t)
	conn := open(t, cfg)
	ctx := context.Background()

	files, err := fs.Glob(chschema.Migrations, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations embedded: %v", err)
	}
	before := count(t, conn, "SELECT count() FROM schema_migrations")
	if before != uint64(len(files)) {
		t.Fatalf("schema_migrations has %d rows, want one per file (%d)", before, len(files))
	}
	for range 2 {
		if err := readmodel.Migrate(ctx, conn, cfg.Database); err != nil {
			t.Fatalf("second Migrate: %v", err)
		}
	}
	if n := count(t, conn, "SELECT count() FROM schema_migrations"); n != before {
		t.Fatalf("after migrating again schema_migrations has %d rows, want %d", n, before)
	}
	for _, table := range []string{"drift_evidence", "drift_history", "consumer_progress", "node_agent_status", "billing_mismatch", "rated_usage"} {
		if n := count(t, conn, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", cfg.Database, table); n != 1 {
			t.Errorf("table %s missing after Migrate", table)
		}
	}
}

// TestDriftEvidenceFinal writes two versions of a finding with a column
// list, the form 18.16 requires, and reads the current one with FINAL.
func TestDriftEvidenceFinal(t *testing.T) {
	cfg := testenv.ClickHouse(t)
	conn := open(t, cfg)
	ctx := context.Background()
	at := time.Date(2026, 11, 21, 10, 15, 30, 0, time.UTC)

	batch, err := conn.PrepareBatch(ctx, `INSERT INTO drift_evidence (evidence_id, resource_family, provider, provider_id,
		classification, severity, status, first_seen_at, last_seen_at, observed_at, retry_count, attention_score, version, updated_at)`)
	if err != nil {
		t.Fatal(err)
	}
	for v, status := range []string{"open", "resolved"} {
		err := batch.Append("ev-1", "gpuaas_allocation", "maas", "node-7",
			"missing_provider_resource", "critical", status, at, at.Add(time.Duration(v)*time.Minute), at, uint32(v), 90.5, uint64(v+1), at)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	var (
		status   string
		retries  uint32
		lastSeen time.Time
	)
	row := conn.QueryRow(ctx, "SELECT status, retry_count, last_seen_at FROM drift_evidence FINAL WHERE evidence_id = ?", "ev-1")
	if err := row.Scan(&status, &retries, &lastSeen); err != nil {
		t.Fatal(err)
	}
	if status != "resolved" || retries != 1 || !lastSeen.Equal(at.Add(time.Minute)) {
		t.Fatalf("FINAL row = %s %d %s, want resolved 1 %s", status, retries, lastSeen, at.Add(time.Minute))
	}
	if n := count(t, conn, "SELECT count() FROM drift_evidence FINAL"); n != 1 {
		t.Fatalf("FINAL count = %d, want 1", n)
	}
}

func TestMigrateRefusesChangedMigration(t *testing.T) {
	cfg := testenv.ClickHouse(t)
	conn := open(t, cfg)
	ctx := context.Background()
	changed := fstest.MapFS{"001_drift_evidence.sql": {Data: []byte("CREATE TABLE IF NOT EXISTS x (a UInt8) ENGINE = MergeTree ORDER BY a")}}
	var ce *readmodel.ChecksumError
	if err := readmodel.MigrateFS(ctx, conn, cfg.Database, changed); !errors.As(err, &ce) || ce.Version != 1 {
		t.Fatalf("MigrateFS with a changed applied migration = %v, want ChecksumError for version 1", err)
	}
}

func TestMigrateFailedStatementRunsAgain(t *testing.T) {
	cfg := testenv.ClickHouse(t)
	conn := open(t, cfg)
	ctx := context.Background()
	const good = "CREATE TABLE IF NOT EXISTS extra (a UInt8) ENGINE = MergeTree ORDER BY a"
	broken := fstest.MapFS{"900_extra.sql": {Data: []byte(good + "\n;\nALTER TABLE extra ADD COLUMN b NoSuchType\n")}}
	var se *readmodel.StatementError
	if err := readmodel.MigrateFS(ctx, conn, cfg.Database, broken); !errors.As(err, &se) || se.Index != 2 {
		t.Fatalf("MigrateFS with a bad statement = %v, want StatementError for statement 2", err)
	}
	if n := count(t, conn, "SELECT count() FROM schema_migrations WHERE version = 900"); n != 0 {
		t.Fatal("failed migration was recorded")
	}
	// 18.16 knows no ADD COLUMN IF NOT EXISTS; idempotent steps are
	// CREATE ... IF NOT EXISTS.
	fixed := fstest.MapFS{"900_extra.sql": {Data: []byte(good + "\n;\nCREATE TABLE IF NOT EXISTS extra2 (b UInt8) ENGINE = MergeTree ORDER BY b\n")}}
	if err := readmodel.MigrateFS(ctx, conn, cfg.Database, fixed); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, "SELECT count() FROM schema_migrations WHERE version = 900"); n != 1 {
		t.Fatalf("fixed migration recorded %d times, want 1", n)
	}
}

func TestMigrateWrongDatabase(t *testing.T) {
	cfg := testenv.ClickHouse(t)
	conn := open(t, cfg)
	if err := readmodel.Migrate(context.Background(), conn, cfg.Database+"_other"); !errors.Is(err, readmodel.ErrWrongDatabase) {
		t.Fatalf("Migrate on another database = %v, want ErrWrongDatabase", err)
	}
}

func TestOpenSaysWhatToChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := func(cfg service.ClickHouse, want string) {
		t.Helper()
		conn, err := readmodel.Open(ctx, cfg, readmodel.DialTimeout(2*time.Second))
		if err == nil {
			conn.Close()
			t.Fatalf("Open(%+v) succeeded", cfg)
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Open(%+v) = %v, want it to mention %s", cfg, err, want)
		}
	}
	dead := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	f(service.ClickHouse{Addr: dead, Database: "reconcile"}, "DRIFTLINE_CLICKHOUSE_ADDR")
	f(service.ClickHouse{Addr: dead, Database: "bad-name"}, "DRIFTLINE_CLICKHOUSE_DB")
	f(service.ClickHouse{Addr: dead, Database: "reconcile", Compression: "gzip"}, "DRIFTLINE_CLICKHOUSE_COMPRESSION")

	live := testenv.ClickHouse(t)
	f(service.ClickHouse{Addr: live.Addr, Database: "reconcile", User: "nobody"}, "DRIFTLINE_CLICKHOUSE_USER")
	missing := live
	missing.Database = live.Database + "_missing"
	conn, err := readmodel.Open(ctx, missing, readmodel.NoCreate())
	if err == nil {
		conn.Close()
		t.Fatal("Open with NoCreate created the database")
	}
	if !strings.Contains(err.Error(), "create it") {
		t.Fatalf("Open with NoCreate of a missing database = %v, want it to say to create it", err)
	}
}

// TestCompression writes and reads a block over a connection of each
// compression method: the server takes every one the setting offers.
func TestCompression(t *testing.T) {
	ctx := context.Background()
	base := testenv.ClickHouse(t)
	for _, method := range []string{service.CompressionAuto, service.CompressionLZ4, service.CompressionZSTD, service.CompressionNone} {
		cfg := base
		cfg.Compression = method
		conn := open(t, cfg)
		table := "compression_" + method
		if err := conn.Exec(ctx, "CREATE TABLE "+table+" (s String, n UInt64) ENGINE = MergeTree ORDER BY n"); err != nil {
			t.Fatal(err)
		}
		b, err := conn.PrepareBatch(ctx, "INSERT INTO "+table+" (s, n)")
		if err != nil {
			t.Fatal(err)
		}
		const rows = 10_000
		for i := range rows {
			if err := b.Append(strings.Repeat("x", i%50), uint64(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Send(); err != nil {
			t.Fatalf("%s: insert: %v", method, err)
		}
		var n, chars uint64
		if err := conn.QueryRow(ctx, "SELECT count(), sum(length(s)) FROM "+table).Scan(&n, &chars); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if n != rows || chars != rows/50*(49*50/2) {
			t.Fatalf("%s: read back %d rows of %d characters, want %d of %d", method, n, chars, rows, rows/50*(49*50/2))
		}
	}
}

// TestMigrateFineTablesOfRecord migrates a database that holds findings
// and node rows under migrations 001-005 to the current schema, and once
// more as a migration that failed after its renames would run again:
// every row stays, drift_evidence and node_agent_status have granules of
// 256 rows, the copies and their views are gone, and the marks view fills
// from the renamed drift_evidence.
func TestMigrateFineTablesOfRecord(t *testing.T) {
	cfg := testenv.ClickHouse(t)
	conn := open(t, cfg)
	ctx := context.Background()
	exec := func(q string) {
		t.Helper()
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, name := range testenv.Strings(t, conn, "SELECT name FROM system.tables WHERE database = ?", cfg.Database) {
		exec("DROP TABLE IF EXISTS " + name)
	}
	upTo005 := fstest.MapFS{}
	files, err := fs.Glob(chschema.Migrations, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f < "006" {
			b, err := fs.ReadFile(chschema.Migrations, f)
			if err != nil {
				t.Fatal(err)
			}
			upTo005[f] = &fstest.MapFile{Data: b}
		}
	}
	if err := readmodel.MigrateFS(ctx, conn, cfg.Database, upTo005); err != nil {
		t.Fatal(err)
	}
	// Two versions of every third finding and node, in separate parts.
	for v := 1; v <= 2; v++ {
		exec(`INSERT INTO drift_evidence (evidence_id, status, attention_score, version, updated_at)
			SELECT concat('ev-', toString(number)), if(number % 2 = 0, 'open', 'resolved'), number, ` + strconv.Itoa(v) + `, now()
			FROM numbers(30000) WHERE ` + strconv.Itoa(v) + ` = 1 OR number % 3 = 0`)
		exec(`INSERT INTO node_agent_status (node_id, gate, attention_score, version, updated_at)
			SELECT concat('node-', toString(number)), 'pass', number, ` + strconv.Itoa(v) + `, now()
			FROM numbers(3000) WHERE ` + strconv.Itoa(v) + ` = 1 OR number % 3 = 0`)
	}
	const (
		findings = "SELECT count(), sum(version), sum(attention_score) FROM drift_evidence FINAL"
		nodes    = "SELECT count(), sum(version), sum(attention_score) FROM node_agent_status FINAL"
	)
	sums := func(q string) [3]float64 {
		t.Helper()
		var (
			n, v uint64
			s    float64
		)
		if err := conn.QueryRow(ctx, q).Scan(&n, &v, &s); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return [3]float64{float64(n), float64(v), s}
	}
	wantFindings, wantNodes := sums(findings), sums(nodes)
	if wantFindings[0] != 30000 || wantNodes[0] != 3000 {
		t.Fatalf("before the migration: %v findings, %v nodes", wantFindings, wantNodes)
	}

	migration006, err := fs.ReadFile(chschema.Migrations, "006_fine_tables_of_record.sql")
	if err != nil {
		t.Fatal(err)
	}
	for i, migrate := range []func() error{
		func() error { return readmodel.Migrate(ctx, conn, cfg.Database) },
		func() error {
			return readmodel.MigrateFS(ctx, conn, cfg.Database, fstest.MapFS{"906_again.sql": {Data: migration006}})
		},
	} {
		if err := migrate(); err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
		if got := sums(findings); got != wantFindings {
			t.Errorf("migration %d: findings (count, versions, scores) = %v, want %v", i+1, got, wantFindings)
		}
		if got := sums(nodes); got != wantNodes {
			t.Errorf("migration %d: nodes (count, versions, scores) = %v, want %v", i+1, got, wantNodes)
		}
		for _, table := range []string{"drift_evidence", "node_agent_status"} {
			var ddl string
			if err := conn.QueryRow(ctx, "SHOW CREATE TABLE "+table).Scan(&ddl); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(ddl, "index_granularity = 256") {
				t.Errorf("migration %d: %s is not fine-grained: %s", i+1, table, ddl)
			}
		}
		if n := count(t, conn, `SELECT count() FROM system.tables WHERE database = ?
			AND (name LIKE '%\_fine%' OR name LIKE '%\_coarse')`, cfg.Database); n != 0 {
			t.Errorf("migration %d: %d copies or views of copies left", i+1, n)
		}
	}
	exec(`INSERT INTO drift_evidence (evidence_id, status, version, updated_at)
		SELECT concat('ev-new-', toString(number)), 'open', 1, now() FROM numbers(20000)`)
	want := count(t, conn, "SELECT uniqExact(evidence_id) FROM drift_evidence WHERE cityHash64(evidence_id) % 1024 = 0")
	if got := count(t, conn, "SELECT uniqExact(evidence_id) FROM drift_evidence_marks"); got != want || want == 0 {
		t.Errorf("drift_evidence_marks holds %d evidence ids, want %d", got, want)
	}
}
