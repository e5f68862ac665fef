package stack

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/driftline/driftline/internal/freeport"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/service"
)

// Service names, in start order. Stop runs in the reverse order.
const (
	NameClickHouse = "clickhouse"
	NameBroker     = "broker"
	NameIngest     = "ingest"
	NameJoiner     = "joiner"
	NameRater      = "rater"
	NameQuery      = "query"
)

// DefaultServices are the pipeline services the stack runs after the broker,
// in start order: the gateway first so producers can write as soon as
// possible, the query API last since it only reads.
var DefaultServices = []string{NameIngest, NameJoiner, NameRater, NameQuery}

// Options configures a stack. The zero value of a field means its default;
// DefaultOptions fills the defaults from the environment instead.
type Options struct {
	// Dir is the state directory: broker data, ClickHouse data, logs and
	// the state file. Default: .driftline in the working directory
	// (DefaultOptions: RepoDir).
	Dir string
	// BinDir holds the broker and service executables (make build).
	// Default: the directory of the running executable.
	BinDir string

	// BrokerAddr is the loopback address the broker listens on. Default
	// 127.0.0.1:19092. A port of 0 picks a free port (also for every
	// address below).
	BrokerAddr string
	// ClickHouseAddr is ClickHouse's native-protocol address. Default
	// 127.0.0.1:19000.
	ClickHouseAddr string
	// ClickHouseHTTPAddr is ClickHouse's HTTP address. Default
	// 127.0.0.1:18123.
	ClickHouseHTTPAddr string
	// IngestAddr, QueryAddr, JoinerAddr and RaterAddr are the HTTP listen
	// addresses of the services. Defaults: 127.0.0.1:18080, :18081, :18082,
	// :18083.
	IngestAddr, QueryAddr, JoinerAddr, RaterAddr string
	// FreePorts picks a free loopback port for every address left empty,
	// instead of the fixed defaults: for tests that run beside a stack.
	FreePorts bool

	// Database is the ClickHouse database of the read model. Default
	// reconcile.
	Database string
	// ClickHouseUser and ClickHousePassword authenticate to ClickHouse.
	// Default user: default, no password.
	ClickHouseUser, ClickHousePassword string
	// ClickHouseCluster is the cluster of an external ClickHouse
	// (ExternalClickHouse; ClickHouseAddr then lists its servers,
	// comma-separated): the stack migrates in cluster mode and the
	// services run with -clickhouse.cluster. Default: none
	// (DRIFTLINE_CLICKHOUSE_CLUSTER).
	ClickHouseCluster string
	// Environment is the environment profile passed to every service.
	// Default local_parity.
	Environment string
	// Partitions is the partition count of every topic the broker creates.
	// Default 6.
	Partitions int
	// BrokerSync makes the broker fsync every produced batch: no
	// acknowledged record lost on a machine crash, lower throughput.
	BrokerSync bool

	// ExternalClickHouse uses the ClickHouse at ClickHouseAddr instead of
	// starting one (e.g. deploy/redpanda). Migrations still run.
	ExternalClickHouse bool
	// ExternalBroker uses the Kafka-protocol broker at BrokerAddr (any
	// host) instead of starting one; it must already have the topics or
	// allow the services to create them.
	ExternalBroker bool
	// NoInstall never installs ClickHouse. By default a missing server is
	// installed with apt-get when the process runs as root, so a fresh
	// machine needs no setup step.
	NoInstall bool

	// Services are the pipeline services to start after the broker, in
	// order. Default DefaultServices. Tests may start a subset.
	Services []string
	// Env holds extra KEY=VALUE entries for every child, applied last, so
	// they override what the stack sets.
	Env []string

	// Log receives the supervisor's progress lines. Default: discarded.
	Log io.Writer
	// StartTimeout bounds the wait for each component to become healthy.
	// Default 60s. Installing ClickHouse has its own, longer bound.
	StartTimeout time.Duration
	// StopTimeout is the grace each child gets after SIGTERM before it is
	// killed. Default 20s.
	StopTimeout time.Duration
}

// Environment variables read by DefaultOptions, besides those of
// pipeline/service (DRIFTLINE_BROKERS, DRIFTLINE_CLICKHOUSE_ADDR, ...).
const (
	EnvDir                = "DRIFTLINE_DIR"                  // state directory
	EnvBinDir             = "DRIFTLINE_BIN_DIR"              // directory of the executables
	EnvClickHouseHTTP     = "DRIFTLINE_CLICKHOUSE_HTTP_ADDR" // ClickHouse HTTP address
	EnvBrokerSync         = "DRIFTLINE_BROKER_SYNC"          // 1: fsync every produced batch
	EnvExternalClickHouse = "DRIFTLINE_EXTERNAL_CLICKHOUSE"  // 1: use a running ClickHouse
	EnvExternalBroker     = "DRIFTLINE_EXTERNAL_BROKER"      // 1: use a running broker
	EnvInstallClickHouse  = "DRIFTLINE_INSTALL_CLICKHOUSE"   // 0: never install ClickHouse
)

// DefaultOptions returns the options of the local stack, taking each
// setting from its environment variable when set (see the package doc).
func DefaultOptions() Options {
	return Options{
		Dir:                service.Env(EnvDir, RepoDir()),
		BinDir:             service.Env(EnvBinDir, ""),
		BrokerAddr:         firstBroker(service.Env("DRIFTLINE_BROKERS", service.DefaultBrokers)),
		ClickHouseAddr:     service.Env("DRIFTLINE_CLICKHOUSE_ADDR", service.DefaultClickHouseAddr),
		ClickHouseHTTPAddr: service.Env(EnvClickHouseHTTP, service.DefaultClickHouseHTTP),
		IngestAddr:         service.Env("DRIFTLINE_INGEST_ADDR", service.DefaultIngestAddr),
		QueryAddr:          service.Env("DRIFTLINE_QUERY_ADDR", service.DefaultQueryAddr),
		JoinerAddr:         service.Env("DRIFTLINE_JOINER_ADDR", service.DefaultJoinerAddr),
		RaterAddr:          service.Env("DRIFTLINE_RATER_ADDR", service.DefaultRaterAddr),
		Database:           service.Env("DRIFTLINE_CLICKHOUSE_DB", service.DefaultDatabase),
		ClickHouseUser:     service.Env("DRIFTLINE_CLICKHOUSE_USER", "default"),
		ClickHouseCluster:  service.Env("DRIFTLINE_CLICKHOUSE_CLUSTER", ""),
		ClickHousePassword: service.Env("DRIFTLINE_CLICKHOUSE_PASSWORD", ""),
		Environment:        service.Env("DRIFTLINE_ENV", contract.EnvLocalParity),
		Partitions:         service.EnvInt("DRIFTLINE_PARTITIONS", service.DefaultPartitions),
		BrokerSync:         envBool(EnvBrokerSync, false),
		ExternalClickHouse: envBool(EnvExternalClickHouse, false),
		ExternalBroker:     envBool(EnvExternalBroker, false),
		NoInstall:          !envBool(EnvInstallClickHouse, true),
	}
}

// RepoDir is the default state directory: .driftline at the root of the
// Driftline checkout holding the working directory (found by its go.mod),
// so `make up` and `bin/stack status` run from a subdirectory agree;
// outside a checkout it is ./.driftline.
func RepoDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return ".driftline"
	}
	for d := wd; ; {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/driftline/driftline\n") {
			return filepath.Join(d, ".driftline")
		}
		parent := filepath.Dir(d)
		if parent == d {
			return filepath.Join(wd, ".driftline")
		}
		d = parent
	}
}

// withDefaults returns o with every empty field set and port-0 addresses
// resolved to free ports.
func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		o.Dir = ".driftline"
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return o, fmt.Errorf("state dir: %w", err)
	}
	o.Dir = dir
	if o.BinDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("find executable dir: %w; Possible solutions: set Options.BinDir or %s", err, EnvBinDir)
		}
		o.BinDir = filepath.Dir(exe)
	}
	if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
		return o, fmt.Errorf("bin dir: %w", err)
	}
	addrs := []struct {
		p   *string
		def string
	}{
		{&o.BrokerAddr, service.DefaultBrokers},
		{&o.ClickHouseAddr, service.DefaultClickHouseAddr},
		{&o.ClickHouseHTTPAddr, service.DefaultClickHouseHTTP},
		{&o.IngestAddr, service.DefaultIngestAddr},
		{&o.QueryAddr, service.DefaultQueryAddr},
		{&o.JoinerAddr, service.DefaultJoinerAddr},
		{&o.RaterAddr, service.DefaultRaterAddr},
	}
	for _, a := range addrs {
		if a.p == &o.ClickHouseAddr && o.ExternalClickHouse && *a.p != "" {
			continue // a server of one's own, or a cluster's list
		}
		if *a.p == "" {
			*a.p = a.def
			if o.FreePorts {
				*a.p = "127.0.0.1:0"
			}
		}
		if *a.p, err = resolvePort(*a.p); err != nil {
			return o, err
		}
	}
	if o.Database == "" {
		o.Database = service.DefaultDatabase
	}
	if o.ClickHouseUser == "" {
		o.ClickHouseUser = "default"
	}
	if o.Environment == "" {
		o.Environment = contract.EnvLocalParity
	}
	if !contract.ValidEnvironment(o.Environment) {
		return o, fmt.Errorf("environment %q: must be local_parity, dev or prod", o.Environment)
	}
	if o.Partitions == 0 {
		o.Partitions = service.DefaultPartitions
	}
	if o.Partitions < 1 {
		return o, fmt.Errorf("partitions %d: must be at least 1", o.Partitions)
	}
	if o.Services == nil {
		o.Services = DefaultServices
	}
	for _, s := range o.Services {
		if _, ok := o.serviceAddr(s); !ok {
			return o, fmt.Errorf("unknown service %q: must be one of %v", s, DefaultServices)
		}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 20 * time.Second
	}
	return o, nil
}

// serviceAddr returns the HTTP listen address of a pipeline service.
func (o *Options) serviceAddr(name string) (string, bool) {
	switch name {
	case NameIngest:
		return o.IngestAddr, true
	case NameJoiner:
		return o.JoinerAddr, true
	case NameRater:
		return o.RaterAddr, true
	case NameQuery:
		return o.QueryAddr, true
	}
	return "", false
}

// resolvePort replaces port 0 with a free port on the same host, from
// below the ephemeral range (see internal/freeport), where the stack's own
// connections cannot take it before the child binds it. Another listener
// still may; the child then fails at start with a clear error, which a
// test may retry.
func resolvePort(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", addr, err)
	}
	if port != "0" {
		return addr, nil
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return freeport.Addr(host)
}

func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

func firstBroker(brokers string) string {
	for i := 0; i < len(brokers); i++ {
		if brokers[i] == ',' {
			return brokers[:i]
		}
	}
	return brokers
}

func envBool(key string, def bool) bool {
	switch service.Env(key, "") {
	case "1", "true", "yes", "on":
		return true
	case "0", "false", "no", "off":
		return false
	}
	return def
}
