package readmodel

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/service"
	chschema "github.com/driftline/driftline/schema/clickhouse"
)

// LocalSuffix names the replicated table of each shard behind the
// Distributed table of the same name without it, in cluster mode.
const LocalSuffix = "_local"

// ShardingKeys are the sharding expressions of the tables whose identity
// is narrower than their sorting key: one finding's history, one node's
// transitions and one usage's rated line live on one shard, beside its
// current row. Every other table is sharded by a hash of its whole sorting
// key. Either way all rows of one sorting key live on one shard, so
// ReplacingMergeTree collapses them there and FINAL read through the
// Distributed table is right; a key's rows on two shards would both
// survive FINAL.
var ShardingKeys = map[string]string{
	"drift_evidence":         "cityHash64(evidence_id)",
	"drift_history":          "cityHash64(evidence_id)",
	"drift_evidence_marks":   "cityHash64(evidence_id)",
	"node_agent_status":      "cityHash64(node_id)",
	"node_lifecycle_history": "cityHash64(node_id)",
	"billing_mismatch":       "cityHash64(mismatch_id)",
	"rated_usage":            "cityHash64(usage_id)",
}

// OpenMigrate connects to cfg, applies the migrations (Migrate, or
// MigrateCluster when cfg.Cluster is set) and closes the connection.
func OpenMigrate(ctx context.Context, cfg service.ClickHouse) error {
	if cfg.Cluster != "" {
		return MigrateCluster(ctx, cfg)
	}
	conn, err := Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	return Migrate(ctx, conn, cfg.Database)
}

// MigrateCluster applies the read model's migrations to cfg.Database on
// the cluster cfg.Cluster.
func MigrateCluster(ctx context.Context, cfg service.ClickHouse) error {
	return MigrateClusterFS(ctx, cfg, chschema.Migrations)
}

// MigrateClusterFS applies the migrations of fsys in cluster mode. The
// migrations are written for one server (they create, copy and rename
// plain tables), so they are not run on the cluster: they run on a scratch
// database on the first server of cfg.Addrs, first those already applied,
// then all, and the difference between the two schemas is applied to the
// cluster, ON CLUSTER:
//
//   - a new MergeTree-family table t becomes t_local, its Replicated
//     form on every server (ZooKeeper path /clickhouse/tables/{shard}/<db>/t,
//     replica {replica}), and t, a Distributed table over t_local sharded
//     by ShardingKeys[t] or a hash of its sorting key;
//   - a materialized view is created on every server over the local
//     tables (it sees the inserts of its own shard's replica and writes
//     its shard's replicated table);
//   - new columns are added to t_local, all of a table's in one ALTER,
//     and t is created again with them;
//   - a dropped table or view is dropped.
//
// A migration that changes the engine, partitioning or sorting key of an
// existing table (a copy swapped in by RENAME) cannot be carried out in
// place on a cluster; MigrateClusterFS then returns an error naming the
// table before it changes anything. The applied versions are recorded in
// schema_migrations, one ReplicatedMergeTree table replicated to every
// server, so WaitMigrated works against any of them.
func MigrateClusterFS(ctx context.Context, cfg service.ClickHouse, fsys fs.FS) error {
	if cfg.Cluster == "" {
		return errors.New("migrate cluster: no cluster named; Possible solutions: set -clickhouse.cluster")
	}
	migs, err := loadMigrations(fsys)
	if err != nil {
		return err
	}
	conn, err := Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	db, on := cfg.Database, onCluster(cfg.Cluster)
	// Distributed DDL waits for every server: a migration with nothing to
	// do must not need them all.
	var have uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", db, MigrationsTable).Scan(&have); err != nil {
		return fmt.Errorf("migrate %s: %w", db, err)
	}
	if have == 0 {
		if err := createClusterMigrations(ctx, conn, db, on); err != nil {
			return fmt.Errorf("migrate %s on cluster %s: create %s: %w", db, cfg.Cluster, MigrationsTable, err)
		}
	}
	applied, err := appliedMigrations(ctx, conn)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", db, err)
	}
	if err := checkChecksums(db, migs, applied); err != nil {
		return err
	}
	var done, pending []migration
	for _, m := range migs {
		if _, ok := applied[m.version]; ok {
			done = append(done, m)
		} else {
			pending = append(pending, m)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	before, after, err := scratchSchemas(ctx, cfg, done, pending)
	if err != nil {
		return err
	}
	plan, err := clusterPlan(ctx, conn, cfg, before, after)
	if err != nil {
		return err
	}
	for _, stmt := range plan {
		if err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("migrate %s on cluster %s: %w\nstatement: %s", db, cfg.Cluster, err, stmt)
		}
	}
	for _, m := range pending {
		if err := record(ctx, conn, m); err != nil {
			return fmt.Errorf("migrate %s: record %s: %w", db, m.name, err)
		}
	}
	return nil
}

// createClusterMigrations creates schema_migrations on every server as
// one ReplicatedMergeTree table that all of them replicate.
func createClusterMigrations(ctx context.Context, conn driver.Conn, db, on string) error {
	return conn.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s%s
(
    version    UInt32,
    name       String,
    checksum   String,
    applied_at DateTime
)
ENGINE = ReplicatedMergeTree('/clickhouse/driftline/%s/%s', '{shard}-{replica}')
ORDER BY version`, db, MigrationsTable, on, db, MigrationsTable))
}

// tableDef is a table of the scratch database, as the server describes it.
type tableDef struct {
	name       string
	engine     string // MergeTree family, MaterializedView, ...
	engineFull string // engine with its arguments, keys and settings
	sortingKey string
	create     string // create_table_query
	columns    []columnDef
}

type columnDef struct {
	name, typ, defaultKind, defaultExpr string
}

func (c columnDef) spec() string {
	s := "`" + c.name + "` " + c.typ
	if c.defaultKind != "" {
		s += " " + c.defaultKind + " " + c.defaultExpr
	}
	return s
}

// scratchSchemas runs the done migrations, then the pending ones, on a
// fresh scratch database of the first server and returns its tables after
// each step. The scratch database is dropped again.
func scratchSchemas(ctx context.Context, cfg service.ClickHouse, done, pending []migration) (before, after map[string]tableDef, err error) {
	scratch := cfg
	scratch.Cluster = ""
	scratch.Addr = cfg.Addrs()[0]
	scratch.Database = cfg.Database + "_migrate_scratch"
	admin := scratch
	admin.Database = "default"
	aconn, err := Open(ctx, admin, NoCreate())
	if err != nil {
		return nil, nil, err
	}
	defer aconn.Close()
	drop := func() error { return aconn.Exec(ctx, "DROP DATABASE IF EXISTS "+scratch.Database) }
	if err := drop(); err != nil {
		return nil, nil, fmt.Errorf("migrate cluster: drop scratch database: %w", err)
	}
	sconn, err := Open(ctx, scratch)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		sconn.Close()
		if derr := drop(); derr != nil && err == nil {
			err = fmt.Errorf("migrate cluster: drop scratch database: %w", derr)
		}
	}()
	if err := sconn.Exec(ctx, createMigrationsTable); err != nil {
		return nil, nil, err
	}
	if err := applyMigrations(ctx, sconn, scratch.Database, done); err != nil {
		return nil, nil, fmt.Errorf("migrate cluster: replay applied migrations on a scratch database: %w", err)
	}
	if before, err = describe(ctx, sconn, scratch.Database); err != nil {
		return nil, nil, err
	}
	if err := applyMigrations(ctx, sconn, scratch.Database, append(append([]migration(nil), done...), pending...)); err != nil {
		return nil, nil, fmt.Errorf("migrate cluster: new migrations on a scratch database: %w", err)
	}
	if after, err = describe(ctx, sconn, scratch.Database); err != nil {
		return nil, nil, err
	}
	return before, after, nil
}

// describe returns the tables of database but schema_migrations.
func describe(ctx context.Context, conn driver.Conn, database string) (map[string]tableDef, error) {
	out := map[string]tableDef{}
	rows, err := conn.Query(ctx, `SELECT name, engine, engine_full, sorting_key, create_table_query
		FROM system.tables WHERE database = ? AND name != ? AND NOT startsWith(name, '.inner.')`, database, MigrationsTable)
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", database, err)
	}
	for rows.Next() {
		var t tableDef
		if err := rows.Scan(&t.name, &t.engine, &t.engineFull, &t.sortingKey, &t.create); err != nil {
			rows.Close()
			return nil, fmt.Errorf("describe %s: %w", database, err)
		}
		out[t.name] = t
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("describe %s: %w", database, err)
	}
	cols, err := columnsOf(ctx, conn, database)
	if err != nil {
		return nil, err
	}
	for name, t := range out {
		t.columns = cols[name]
		out[name] = t
	}
	return out, nil
}

// columnsOf returns the columns of every table of database, in order.
func columnsOf(ctx context.Context, conn driver.Conn, database string) (map[string][]columnDef, error) {
	rows, err := conn.Query(ctx, `SELECT table, name, type, default_kind, default_expression
		FROM system.columns WHERE database = ?`, database)
	if err != nil {
		return nil, fmt.Errorf("describe %s columns: %w", database, err)
	}
	defer rows.Close()
	out := map[string][]columnDef{}
	for rows.Next() {
		var table string
		var c columnDef
		if err := rows.Scan(&table, &c.name, &c.typ, &c.defaultKind, &c.defaultExpr); err != nil {
			return nil, fmt.Errorf("describe %s columns: %w", database, err)
		}
		out[table] = append(out[table], c)
	}
	return out, rows.Err()
}

func mergeTree(t tableDef) bool { return strings.HasSuffix(t.engine, "MergeTree") }

// clusterPlan returns the ON CLUSTER statements that take the cluster from
// before to after: drops of views and tables that went away, new and
// widened replicated tables, their Distributed tables, then views.
func clusterPlan(ctx context.Context, conn driver.Conn, cfg service.ClickHouse, before, after map[string]tableDef) ([]string, error) {
	db, cluster, on := cfg.Database, cfg.Cluster, onCluster(cfg.Cluster)
	names := make([]string, 0, len(after))
	for n := range after {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := after[n]
		if t.engine != "MaterializedView" && !mergeTree(t) {
			return nil, fmt.Errorf("migrate %s on cluster %s: table %s has engine %s; cluster mode knows MergeTree tables and materialized views", db, cluster, n, t.engine)
		}
		if old, ok := before[n]; ok && mergeTree(t) && (old.engine != t.engine || old.engineFull != t.engineFull) {
			return nil, fmt.Errorf("migrate %s on cluster %s: the new migrations change the engine, partitioning or keys of %s (%s -> %s), which cannot be done in place on a cluster; "+
				"Possible solutions: add a migration that creates the new form under a new table name, or rebuild the cluster's read model from the topics", db, cluster, n, old.engineFull, t.engineFull)
		}
	}
	current, err := columnsOf(ctx, conn, db)
	if err != nil {
		return nil, err
	}
	var plan, views []string
	// Drops first: a view that went away must stop writing before its
	// tables change.
	var gone []string
	for n := range before {
		if _, ok := after[n]; !ok {
			gone = append(gone, n)
		}
	}
	sort.Slice(gone, func(i, j int) bool {
		vi, vj := before[gone[i]].engine == "MaterializedView", before[gone[j]].engine == "MaterializedView"
		return vi && !vj || vi == vj && gone[i] < gone[j]
	})
	for _, n := range gone {
		plan = append(plan, fmt.Sprintf("DROP TABLE IF EXISTS %s.%s%s", db, n, on))
		if mergeTree(before[n]) {
			plan = append(plan, fmt.Sprintf("DROP TABLE IF EXISTS %s.%s%s%s", db, n, LocalSuffix, on))
		}
	}
	for _, n := range names {
		t := after[n]
		if t.engine == "MaterializedView" {
			if old, ok := before[n]; !ok || old.create != t.create {
				if ok {
					plan = append(plan, fmt.Sprintf("DROP TABLE IF EXISTS %s.%s%s", db, n, on))
				}
				v, err := viewOnCluster(t, db, cluster, after)
				if err != nil {
					return nil, err
				}
				views = append(views, v)
			}
			continue
		}
		local := n + LocalSuffix
		have, exists := current[local]
		if !exists {
			engine, err := replicated(t.engineFull, db, n)
			if err != nil {
				return nil, err
			}
			specs := make([]string, len(t.columns))
			for i, c := range t.columns {
				specs[i] = "    " + c.spec()
			}
			plan = append(plan, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s%s\n(\n%s\n)\nENGINE = %s", db, local, on, strings.Join(specs, ",\n"), engine))
		} else {
			known := map[string]bool{}
			for _, c := range have {
				known[c.name] = true
			}
			// One ALTER adds all of a table's new columns: each ALTER ON
			// CLUSTER of a replicated table is a round through the DDL
			// queue and every replica, and its commands apply in order,
			// so a column may come AFTER one added before it.
			var adds []string
			prev := ""
			for _, c := range t.columns {
				if !known[c.name] {
					add := "ADD COLUMN " + c.spec()
					if prev != "" {
						add += " AFTER `" + prev + "`"
					}
					adds = append(adds, add)
				}
				prev = c.name
			}
			if len(adds) > 0 {
				plan = append(plan, fmt.Sprintf("ALTER TABLE %s.%s%s\n    %s", db, local, on, strings.Join(adds, ",\n    ")))
			}
			if _, distExists := current[n]; distExists && sameColumns(current[n], t.columns) {
				continue
			}
		}
		// The Distributed table holds no data (inserts are synchronous),
		// so it is made again rather than altered: 18.16 refuses ALTER
		// ON CLUSTER of a table that is not replicated in a cluster whose
		// shards are.
		plan = append(plan,
			fmt.Sprintf("DROP TABLE IF EXISTS %s.%s%s", db, n, on),
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s%s AS %s.%s ENGINE = Distributed(%s, %s, %s, %s)", db, n, on, db, local, cluster, db, local, shardingKey(t)))
	}
	return append(plan, views...), nil
}

func sameColumns(a, b []columnDef) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// shardingKey returns t's sharding expression (ShardingKeys).
func shardingKey(t tableDef) string {
	if k, ok := ShardingKeys[t.name]; ok {
		return k
	}
	if t.sortingKey == "" {
		return "rand()"
	}
	return "cityHash64(" + t.sortingKey + ")"
}

var engineName = regexp.MustCompile(`^([A-Za-z]*MergeTree)(\(([^)]*)\))?`)

// replicated turns a MergeTree-family engine_full into its Replicated form
// for table t of database db.
func replicated(engineFull, db, t string) (string, error) {
	m := engineName.FindStringSubmatchIndex(engineFull)
	if m == nil {
		return "", fmt.Errorf("migrate cluster: engine of %s: %q is not of the MergeTree family", t, engineFull)
	}
	name := engineFull[m[2]:m[3]]
	args := fmt.Sprintf("'/clickhouse/tables/{shard}/%s/%s', '{replica}'", db, t)
	if m[6] >= 0 && strings.TrimSpace(engineFull[m[6]:m[7]]) != "" {
		args += ", " + engineFull[m[6]:m[7]]
	}
	return "Replicated" + name + "(" + args + ")" + engineFull[m[1]:], nil
}

var viewHead = regexp.MustCompile(`^CREATE MATERIALIZED VIEW (\S+)`)

// viewOnCluster rewrites a scratch view's create_table_query for every
// server of the cluster: qualified names of the scratch database become
// the read model's, MergeTree tables their _local tables.
func viewOnCluster(v tableDef, db, cluster string, tables map[string]tableDef) (string, error) {
	scratchDB := ""
	if m := viewHead.FindStringSubmatch(v.create); m != nil {
		if i := strings.LastIndexByte(m[1], '.'); i > 0 {
			scratchDB = m[1][:i]
		}
	}
	if scratchDB == "" {
		return "", fmt.Errorf("migrate cluster: view %s: cannot read %q", v.name, v.create)
	}
	q := regexp.MustCompile(regexp.QuoteMeta(scratchDB)+`\.([A-Za-z_][A-Za-z0-9_]*)`).ReplaceAllStringFunc(v.create, func(s string) string {
		n := s[len(scratchDB)+1:]
		if t, ok := tables[n]; ok && mergeTree(t) {
			return db + "." + n + LocalSuffix
		}
		return db + "." + n
	})
	return viewHead.ReplaceAllString(q, "CREATE MATERIALIZED VIEW IF NOT EXISTS $1 ON CLUSTER "+cluster), nil
}
