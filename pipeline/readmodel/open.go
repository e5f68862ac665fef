package readmodel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"regexp"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/driftline/driftline/pipeline/service"
)

// Defaults of the options of Open.
const (
	DefaultDialTimeout  = 5 * time.Second
	DefaultReadTimeout  = 2 * time.Minute
	DefaultMaxOpenConns = 10
)

// Settings sent with every query. Values are integers: servers before
// protocol revision 54429 (18.16 among them) take settings only as
// integers on the wire.
var baseSettings = clickhouse.Settings{
	// The schema uses LowCardinality, experimental on 18.16; current
	// releases accept the setting as obsolete and ignore it.
	"allow_experimental_low_cardinality_type": 1,
}

// clusterSettings are sent with every query in cluster mode. An insert
// into a Distributed table returns once every shard's replica has the
// rows (insert_distributed_sync), not once they are queued on the server
// the client reached: the writers commit their Kafka offsets after the
// write, so the write must be in a replicated table by then, not in a
// queue on one server that may die with it.
//
// A read asks every shard over the network, its own server's shard too
// (prefer_localhost_replica=0): 18.16 reads the local shard in process
// without the columns FINAL merges by when the query also sorts ("Cannot
// find column version in source stream"); the loopback connection costs
// next to nothing.
var clusterSettings = clickhouse.Settings{
	"insert_distributed_sync":  1,
	"prefer_localhost_replica": 0,
}

// onCluster is the ON CLUSTER clause of DDL in cluster mode, or "".
func onCluster(cluster string) string {
	if cluster == "" {
		return ""
	}
	return " ON CLUSTER " + cluster
}

type options struct {
	dialTimeout time.Duration
	readTimeout time.Duration
	settings    clickhouse.Settings
	create      bool
	compression clickhouse.CompressionMethod // from the config
	tls         *tls.Config                  // from the config; nil: plain TCP
}

// Opt configures Open.
type Opt func(*options)

// DialTimeout bounds connecting to the server. Default: 5s.
func DialTimeout(d time.Duration) Opt { return func(o *options) { o.dialTimeout = d } }

// ReadTimeout bounds each wait for data from the server; the server sends
// progress during long queries, so this bounds silence, not query time.
// Default: 2m.
func ReadTimeout(d time.Duration) Opt { return func(o *options) { o.readTimeout = d } }

// NoCreate makes Open fail if the database is missing instead of creating
// it, for users without the right to create databases.
func NoCreate() Opt { return func(o *options) { o.create = false } }

// identifier is what Open accepts as a database name: names that need no
// quoting anywhere (SQL, shell, file names).
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Open connects to cfg.Database on cfg.Addr over the native protocol and
// checks the connection. Unless NoCreate is given it first creates the
// database when it is missing, connecting to the database "default" to do
// so.
func Open(ctx context.Context, cfg service.ClickHouse, opts ...Opt) (driver.Conn, error) {
	o := options{
		dialTimeout: DefaultDialTimeout,
		readTimeout: DefaultReadTimeout,
		settings:    clickhouse.Settings{},
		create:      true,
	}
	for k, v := range baseSettings {
		o.settings[k] = v
	}
	for _, opt := range opts {
		opt(&o)
	}
	if cfg.Cluster != "" {
		for k, v := range clusterSettings {
			o.settings[k] = v
		}
		if !identifier.MatchString(cfg.Cluster) {
			return nil, fmt.Errorf("clickhouse cluster %q: want letters, digits and underscores; Possible solutions: set DRIFTLINE_CLICKHOUSE_CLUSTER (or -clickhouse.cluster) to the name in the servers' remote_servers", cfg.Cluster)
		}
	}
	if len(cfg.Addrs()) == 0 {
		return nil, errors.New("clickhouse address is empty; Possible solutions: set DRIFTLINE_CLICKHOUSE_ADDR (or -clickhouse.addr) to the server's native-protocol host:port")
	}
	method, err := compression(cfg)
	if err != nil {
		return nil, err
	}
	o.compression = method
	if o.tls, err = cfg.TLS.Config(); err != nil {
		return nil, fmt.Errorf("-clickhouse.tls.*: %w", err)
	}
	if !identifier.MatchString(cfg.Database) {
		return nil, fmt.Errorf("clickhouse database %q: want letters, digits and underscores, not starting with a digit; Possible solutions: set DRIFTLINE_CLICKHOUSE_DB (or -clickhouse.db) to such a name", cfg.Database)
	}
	if o.create {
		admin, err := dial(ctx, cfg, "default", o)
		if err != nil {
			return nil, err
		}
		err = createDatabase(ctx, admin, cfg)
		admin.Close()
		if err != nil {
			return nil, fmt.Errorf("create clickhouse database %s: %w", cfg.Database, err)
		}
	}
	return dial(ctx, cfg, cfg.Database, o)
}

// createDatabase creates cfg.Database when it is missing; on a cluster,
// ON CLUSTER, and only when the server reached lacks it: distributed DDL
// waits for every server, so a process must not need it to start while a
// replica is down.
func createDatabase(ctx context.Context, admin driver.Conn, cfg service.ClickHouse) error {
	if cfg.Cluster != "" {
		var n uint64
		if err := admin.QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = ?", cfg.Database).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
	return admin.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+cfg.Database+onCluster(cfg.Cluster))
}

func dial(ctx context.Context, cfg service.ClickHouse, database string, o options) (driver.Conn, error) {
	user := cfg.User
	if user == "" {
		user = "default"
	}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Protocol: clickhouse.Native,
		Addr:     cfg.Addrs(),
		Auth: clickhouse.Auth{
			Database: database,
			Username: user,
			Password: cfg.Password,
		},
		Settings:        o.settings,
		DialTimeout:     o.dialTimeout,
		ReadTimeout:     o.readTimeout,
		MaxOpenConns:    DefaultMaxOpenConns,
		MaxIdleConns:    min(5, DefaultMaxOpenConns),
		ConnMaxLifetime: time.Hour,
		Compression:     &clickhouse.Compression{Method: o.compression},
		TLS:             o.tls,
		ClientInfo: clickhouse.ClientInfo{Products: []struct{ Name, Version string }{
			{Name: "driftline"},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("clickhouse options: %w", err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, connectError(cfg, database, user, err)
	}
	return conn, nil
}

// connectError says what to change for the usual reasons a connection
// fails.
func connectError(cfg service.ClickHouse, database, user string, err error) error {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		switch ex.Code {
		case 192, 193, 194, 516: // UNKNOWN_USER, WRONG_PASSWORD, REQUIRED_PASSWORD, AUTHENTICATION_FAILED
			return fmt.Errorf("connect to clickhouse at %s as %s: %w; Possible solutions: set DRIFTLINE_CLICKHOUSE_USER and DRIFTLINE_CLICKHOUSE_PASSWORD (or -clickhouse.user, -clickhouse.password)", cfg.Addr, user, err)
		case 81: // UNKNOWN_DATABASE
			return fmt.Errorf("connect to clickhouse at %s: database %s: %w; Possible solutions: create it, or let the process create it (drop NoCreate)", cfg.Addr, database, err)
		}
		return fmt.Errorf("connect to clickhouse at %s: %w", cfg.Addr, err)
	}
	return fmt.Errorf("connect to clickhouse at %s: %w; Possible solutions: start the server, or point DRIFTLINE_CLICKHOUSE_ADDR (or -clickhouse.addr) at its native-protocol port (9000 by default, 19000 in the local stack), not the HTTP port", cfg.Addr, err)
}

// compression returns the method cfg.Compression names; auto is none for a
// loopback address (an address on this host: compressing would cost CPU
// on both ends and save no network) and lz4 otherwise.
func compression(cfg service.ClickHouse) (clickhouse.CompressionMethod, error) {
	switch cfg.Compression {
	case service.CompressionLZ4:
		return clickhouse.CompressionLZ4, nil
	case service.CompressionZSTD:
		return clickhouse.CompressionZSTD, nil
	case service.CompressionNone:
		return clickhouse.CompressionNone, nil
	case "", service.CompressionAuto:
		if loopbackAll(cfg.Addrs()) {
			return clickhouse.CompressionNone, nil
		}
		return clickhouse.CompressionLZ4, nil
	}
	return 0, fmt.Errorf("clickhouse compression %q: want auto, lz4, zstd or none; Possible solutions: set DRIFTLINE_CLICKHOUSE_COMPRESSION (or -clickhouse.compression) to one of them", cfg.Compression)
}

// loopbackAll reports whether every address of addrs is on this host.
func loopbackAll(addrs []string) bool {
	for _, a := range addrs {
		if !loopback(a) {
			return false
		}
	}
	return len(addrs) > 0
}

// loopback reports whether the host of addr is localhost or a loopback IP.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
