// Package service holds what every Driftline binary shares: the settings
// of the environment profile, the broker, ClickHouse and topic names
// (RegisterFlags), the logging flags (LogFlags, SetupLogging), both on
// the command line of a binary that is no stream stage (NewCommandLine),
// the servers' and clients' TLS (ServerTLSConfig, ClientTLSConfig), and
// the operational HTTP endpoints (Serve). Each setting is a flag whose
// default comes from an environment variable, so the local stack, tests
// and production all configure processes the same way.
//
//	DRIFTLINE_ENV                 environment profile (local_parity | dev | prod)
//	DRIFTLINE_BROKERS             comma-separated Kafka seed brokers
//	DRIFTLINE_PARTITIONS          partitions of each topic created at start
//	DRIFTLINE_CLICKHOUSE_ADDR     ClickHouse native-protocol address
//	DRIFTLINE_CLICKHOUSE_DB       ClickHouse database
//	DRIFTLINE_CLICKHOUSE_USER     ClickHouse user
//	DRIFTLINE_CLICKHOUSE_PASSWORD ClickHouse password
//	DRIFTLINE_CLICKHOUSE_COMPRESSION auto | lz4 | zstd | none
//	DRIFTLINE_LOG_LEVEL           debug | info | warn | error
//	DRIFTLINE_LOG_FORMAT          text | json
package service

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/driftline/driftline/pipeline/contract"
)

// Local-stack defaults: loopback ports that do not collide with a Kafka or
// ClickHouse a developer may already run on the standard ports.
const (
	DefaultBrokers        = "127.0.0.1:19092"
	DefaultClickHouseAddr = "127.0.0.1:19000"
	DefaultClickHouseHTTP = "127.0.0.1:18123"
	DefaultDatabase       = "reconcile"
	DefaultIngestAddr     = "127.0.0.1:18080"
	DefaultQueryAddr      = "127.0.0.1:18081"
	DefaultJoinerAddr     = "127.0.0.1:18082"
	DefaultRaterAddr      = "127.0.0.1:18083"
	DefaultPartitions     = 6
	// DefaultLocalAPIKey is the API key the local stack's ingest gateway
	// accepts. It is for local_parity only; dev and prod refuse it.
	DefaultLocalAPIKey = "dl_local_parity_key"
)

// Common is the configuration every process shares.
type Common struct {
	Environment  string          // environment profile
	Brokers      string          // comma-separated seed brokers
	Partitions   int             // partitions of each topic when created
	CreateTopics bool            // create missing topics at start
	ClickHouse   ClickHouse      // ClickHouse connection
	Topics       contract.Topics // topic names
	Kafka        Kafka           // replication of created topics, client TLS and SASL
}

// ClickHouse says how to reach ClickHouse.
type ClickHouse struct {
	Addr     string // native protocol host:port
	Database string // database holding the read model
	User     string
	Password string
	// Compression is how blocks travel on the connection: lz4, zstd or
	// none; auto (or empty) is none when Addr is a loopback address,
	// where compressing costs CPU on both ends and saves no network, and
	// lz4 otherwise.
	Compression string
	// TLS says how to encrypt the connection; off by default.
	TLS ClickHouseTLS
	// Cluster names the ClickHouse cluster the read model is sharded and
	// replicated over; empty: one server. Addr may then list several of
	// its servers, comma-separated.
	Cluster string
}

// Addrs splits Addr into the addresses of the servers to try, in order.
func (c ClickHouse) Addrs() []string {
	var out []string
	for _, a := range strings.Split(c.Addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Compression settings of ClickHouse; chdb.Open rejects any other, as it
// does a database name it cannot use.
const (
	CompressionAuto = "auto"
	CompressionLZ4  = "lz4"
	CompressionZSTD = "zstd"
	CompressionNone = "none"
)

// Env returns the environment variable key, or def when it is unset.
func Env(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

// EnvInt is Env for integers; a malformed value falls back to def.
func EnvInt(key string, def int) int {
	if v, err := strconv.Atoi(Env(key, "")); err == nil {
		return v
	}
	return def
}

// RegisterFlags registers the shared flags on fs with defaults from the
// environment, and returns the Common they fill.
func RegisterFlags(fs *flag.FlagSet) *Common {
	c := &Common{Topics: contract.DefaultTopics()}
	fs.StringVar(&c.Environment, "env", Env("DRIFTLINE_ENV", contract.EnvLocalParity), "environment profile: local_parity, dev or prod; events for another environment are rejected")
	fs.StringVar(&c.Brokers, "kafka.brokers", Env("DRIFTLINE_BROKERS", DefaultBrokers), "comma-separated Kafka/Redpanda seed brokers")
	fs.IntVar(&c.Partitions, "kafka.partitions", EnvInt("DRIFTLINE_PARTITIONS", DefaultPartitions), "partitions of each topic created at start; co-partitioned topics must agree, so choose once")
	fs.BoolVar(&c.CreateTopics, "kafka.createTopics", true, "create missing topics at start; turn off where topics are managed elsewhere")
	fs.StringVar(&c.ClickHouse.Addr, "clickhouse.addr", Env("DRIFTLINE_CLICKHOUSE_ADDR", DefaultClickHouseAddr), "ClickHouse native-protocol address; with -clickhouse.cluster a comma-separated list of the cluster's servers, tried in order when one is down")
	fs.StringVar(&c.ClickHouse.Cluster, "clickhouse.cluster", Env("DRIFTLINE_CLICKHOUSE_CLUSTER", ""), "ClickHouse cluster (remote_servers) the read model lives on: ReplicatedMergeTree tables <t>_local ON CLUSTER with Distributed tables <t> in front, sharded by each table's identity key (docs/deploy.md); empty: one server, plain tables")
	fs.StringVar(&c.ClickHouse.Database, "clickhouse.db", Env("DRIFTLINE_CLICKHOUSE_DB", DefaultDatabase), "ClickHouse database of the read model")
	fs.StringVar(&c.ClickHouse.User, "clickhouse.user", Env("DRIFTLINE_CLICKHOUSE_USER", "default"), "ClickHouse user")
	fs.StringVar(&c.ClickHouse.Password, "clickhouse.password", Env("DRIFTLINE_CLICKHOUSE_PASSWORD", ""), "ClickHouse password")
	fs.StringVar(&c.ClickHouse.Compression, "clickhouse.compression", Env("DRIFTLINE_CLICKHOUSE_COMPRESSION", CompressionAuto), "compression of the ClickHouse connection: lz4, zstd, none, or auto (none to a loopback address, lz4 otherwise)")
	c.Topics.RegisterFlags(fs)
	c.Kafka.registerFlags(fs)
	registerClickHouseTLS(fs, &c.ClickHouse.TLS)
	return c
}

// SeedBrokers splits Brokers into addresses.
func (c *Common) SeedBrokers() []string {
	var out []string
	for _, b := range strings.Split(c.Brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// Validate checks the shared settings.
func (c *Common) Validate() error {
	if !contract.ValidEnvironment(c.Environment) {
		return fmt.Errorf("-env %q: must be local_parity, dev or prod", c.Environment)
	}
	if len(c.SeedBrokers()) == 0 {
		return fmt.Errorf("-kafka.brokers is empty")
	}
	if c.Partitions < 1 {
		return fmt.Errorf("-kafka.partitions %d: must be at least 1", c.Partitions)
	}
	return c.Kafka.Validate()
}
