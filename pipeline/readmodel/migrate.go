package readmodel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	chschema "github.com/driftline/driftline/schema/clickhouse"
)

// MigrationsTable records the applied migrations of a database.
const MigrationsTable = "schema_migrations"

// A plain MergeTree: two processes migrating at once may both record a
// version; rows agreeing on the checksum are one migration to Migrate.
const createMigrationsTable = `CREATE TABLE IF NOT EXISTS ` + MigrationsTable + `
(
    version    UInt32,
    name       String,
    checksum   String,
    applied_at DateTime
)
ENGINE = MergeTree
ORDER BY version`

// migration is one NNN_name.sql file.
type migration struct {
	version    uint32
	name       string // file name
	checksum   string // hex SHA-256 of the file
	statements []string
}

var migrationName = regexp.MustCompile(`^([0-9]+)_[^/]+\.sql$`)

// Migrate applies the read model's migrations (chschema.Migrations) to
// database. conn must be open on that database (Open does so): the
// migrations name their tables unqualified.
func Migrate(ctx context.Context, conn driver.Conn, database string) error {
	return MigrateFS(ctx, conn, database, chschema.Migrations)
}

// MigrateFS applies the migrations in the top directory of fsys, files
// named NNN_name.sql, in order of NNN, each once. Statements in a file are
// separated by a line holding only ";". An applied migration is recorded
// with its checksum in schema_migrations; if an applied file has changed
// since, MigrateFS returns a *ChecksumError before applying anything. A
// failing statement returns a *StatementError and leaves its migration
// unrecorded, to be run again from its start.
//
// Statements must therefore be idempotent and run on ClickHouse 18.16,
// which knows CREATE/DROP ... IF [NOT] EXISTS but not ALTER TABLE ... ADD
// COLUMN IF NOT EXISTS, column CODECs, table TTL or the IPv4 type. An
// ALTER TABLE that adds one column (one ADD COLUMN per statement) is
// idempotent all the same: the column it fails to add because it exists
// was added by an earlier run of its migration, and the failure is
// skipped.
func MigrateFS(ctx context.Context, conn driver.Conn, database string, fsys fs.FS) error {
	migs, err := loadMigrations(fsys)
	if err != nil {
		return err
	}
	var current string
	if err := conn.QueryRow(ctx, "SELECT currentDatabase()").Scan(&current); err != nil {
		return fmt.Errorf("migrate: current database: %w", err)
	}
	if current != database {
		return fmt.Errorf("migrate %s: %w (%s); Possible solutions: open the connection with that database (chdb.Open with config.ClickHouse.Database)", database, ErrWrongDatabase, current)
	}
	if err := conn.Exec(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("migrate %s: create %s: %w", database, MigrationsTable, err)
	}
	return applyMigrations(ctx, conn, database, migs)
}

// applyMigrations applies those of migs that schema_migrations does not
// record, in order, and records each.
func applyMigrations(ctx context.Context, conn driver.Conn, database string, migs []migration) error {
	applied, err := appliedMigrations(ctx, conn)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", database, err)
	}
	if err := checkChecksums(database, migs, applied); err != nil {
		return err
	}
	for _, m := range migs {
		if _, ok := applied[m.version]; ok {
			continue
		}
		for i, stmt := range m.statements {
			if err := conn.Exec(ctx, stmt); err != nil && !columnAddedBefore(stmt, err) {
				return &StatementError{Name: m.name, Index: i + 1, Statement: stmt, Err: err}
			}
		}
		if err := record(ctx, conn, m); err != nil {
			return fmt.Errorf("migrate %s: record %s: %w", database, m.name, err)
		}
	}
	return nil
}

// checkChecksums returns a *ChecksumError if an applied migration's file
// has changed since.
func checkChecksums(database string, migs []migration, applied map[uint32]string) error {
	for _, m := range migs {
		if sum, ok := applied[m.version]; ok && sum != m.checksum {
			return &ChecksumError{Database: database, Version: m.version, Name: m.name, Applied: sum, Current: m.checksum}
		}
	}
	return nil
}

func appliedMigrations(ctx context.Context, conn driver.Conn) (map[uint32]string, error) {
	rows, err := conn.Query(ctx, "SELECT version, checksum FROM "+MigrationsTable)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", MigrationsTable, err)
	}
	defer rows.Close()
	applied := map[uint32]string{}
	for rows.Next() {
		var (
			v   uint32
			sum string
		)
		if err := rows.Scan(&v, &sum); err != nil {
			return nil, fmt.Errorf("read %s: %w", MigrationsTable, err)
		}
		applied[v] = sum
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", MigrationsTable, err)
	}
	return applied, nil
}

func record(ctx context.Context, conn driver.Conn, m migration) error {
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+MigrationsTable+" (version, name, checksum, applied_at)")
	if err != nil {
		return err
	}
	if err := batch.Append(m.version, m.name, m.checksum, time.Now().UTC()); err != nil {
		_ = batch.Abort()
		return err
	}
	return batch.Send()
}

// loadMigrations reads and orders the migration files of fsys.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var migs []migration
	seen := map[uint32]string{}
	for _, e := range entries {
		sub := migrationName.FindStringSubmatch(e.Name())
		if e.IsDir() || sub == nil {
			continue
		}
		v, err := strconv.ParseUint(sub[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("migration %s: version out of range", e.Name())
		}
		if prev, ok := seen[uint32(v)]; ok {
			return nil, fmt.Errorf("migrations %s and %s share version %d; Possible solutions: renumber one", prev, e.Name(), v)
		}
		seen[uint32(v)] = e.Name()
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(b)
		migs = append(migs, migration{
			version:    uint32(v),
			name:       e.Name(),
			checksum:   hex.EncodeToString(sum[:]),
			statements: splitStatements(string(b)),
		})
	}
	sort.Slice(migs, func(i, j int) bool { return migs[i].version < migs[j].version })
	return migs, nil
}

// splitStatements splits a migration at lines holding only ";" and drops
// statements that hold only comments and blank lines.
func splitStatements(src string) []string {
	var (
		out []string
		cur []string
	)
	flush := func() {
		stmt := strings.TrimSpace(strings.Join(cur, "\n"))
		cur = cur[:0]
		for _, l := range strings.Split(stmt, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") {
				out = append(out, stmt)
				return
			}
		}
	}
	for _, line := range strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n") {
		if strings.TrimSpace(line) == ";" {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return out
}

// codeIllegalColumn is ClickHouse's error code for adding a column that
// exists (ILLEGAL_COLUMN), on 18.16 as on current releases.
const codeIllegalColumn = 44

// addOneColumn matches an ALTER TABLE statement that adds exactly one
// column (comments stripped).
var addOneColumn = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+\S+\s+ADD\s+COLUMN\s+[^,]*$`)

// columnAddedBefore reports whether err is stmt, which adds one column,
// failing because the column exists: an earlier run of the migration
// added it.
func columnAddedBefore(stmt string, err error) bool {
	var ex *clickhouse.Exception
	if !errors.As(err, &ex) || ex.Code != codeIllegalColumn {
		return false
	}
	var code []string
	for _, line := range strings.Split(stmt, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			code = append(code, line)
		}
	}
	return addOneColumn.MatchString(strings.Join(code, "\n"))
}
