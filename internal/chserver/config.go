package chserver

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// zkSessionTimeout is a cluster member's ZooKeeper session timeout: short,
// so that a killed replica's session (and its leadership of merges)
// expires within seconds in tests; production configs keep their own.
const zkSessionTimeout = 10 * time.Second

// Files and directories under Options.Dir.
const (
	configFile  = "config.xml"
	usersFile   = "users.xml"
	pidFile     = "clickhouse.pid"
	lockFile    = "start.lock"
	dataDir     = "data"
	tmpDir      = "tmp"
	userFiles   = "user_files"
	formatDir   = "format_schemas"
	logDir      = "log"
	serverLog   = "clickhouse-server.log"
	errorLog    = "clickhouse-server.err.log"
	consoleLog  = "console.log"
	dirFileMode = 0o750
)

// The config keeps to settings both 18.16 and current releases know, in
// the layout both read. Keys a release does not know are ignored by it
// (max_server_memory_usage is new), so nothing here stops either from
// starting. The root element <yandex> is the one 18.16 documents; current
// releases accept it as an alias of <clickhouse>.
var configTmpl = template.Must(template.New("config").Funcs(template.FuncMap{"x": xmlEscape}).Parse(`<?xml version="1.0"?>
<!-- Written by chserver.Start on every start; edits are overwritten. -->
<yandex>
    <logger>
        <level>{{x .LogLevel}}</level>
        <log>{{x .Log}}</log>
        <errorlog>{{x .ErrorLog}}</errorlog>
        <size>50M</size>
        <count>3</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>{{.TCPPort}}</tcp_port>
    <http_port>{{.HTTPPort}}</http_port>
    <path>{{x .Path}}</path>
    <tmp_path>{{x .TmpPath}}</tmp_path>
    <user_files_path>{{x .UserFilesPath}}</user_files_path>
    <format_schema_path>{{x .FormatSchemaPath}}</format_schema_path>
    <users_config>{{x .UsersConfig}}</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mark_cache_size>{{.MarkCacheSize}}</mark_cache_size>
    <uncompressed_cache_size>{{.MarkCacheSize}}</uncompressed_cache_size>
    <max_server_memory_usage>{{.MaxMemory}}</max_server_memory_usage>
    <max_concurrent_queries>100</max_concurrent_queries>
    <mlock_executable>false</mlock_executable>
{{- with .Cluster}}
    <interserver_http_host>127.0.0.1</interserver_http_host>
    <interserver_http_port>{{$.InterserverPort}}</interserver_http_port>
    <remote_servers>
        <{{x .Name}}>
{{- range .Shards}}
            <shard>
                <internal_replication>true</internal_replication>
{{- range .}}
                <replica><host>{{x .Host}}</host><port>{{.Port}}</port></replica>
{{- end}}
            </shard>
{{- end}}
        </{{x .Name}}>
    </remote_servers>
    <zookeeper>
{{- range .ZooKeeper}}
        <node><host>{{x .Host}}</host><port>{{.Port}}</port></node>
{{- end}}
        <session_timeout_ms>{{$.ZKSessionMS}}</session_timeout_ms>
    </zookeeper>
    <macros>
        <cluster>{{x .Name}}</cluster>
        <shard>{{x .Shard}}</shard>
        <replica>{{x .Replica}}</replica>
    </macros>
    <distributed_ddl>
        <path>/clickhouse/task_queue/ddl</path>
    </distributed_ddl>
    <!-- A replica killed while fetching a part leaves its tmp_fetch_
         directory, and 18.16 refuses every later fetch of that part
         ("already exists") until the directory is older than this. -->
    <!-- A replica killed after writing a part and before registering it
         in ZooKeeper finds it "unexpected" at its restart. 18.16 refuses
         to attach the table when such parts hold more than half its rows,
         which a test's small table always does; at 1 the replica moves
         them aside (detached) and fetches the table from its peer. -->
    <merge_tree>
        <temporary_directories_lifetime>30</temporary_directories_lifetime>
        <replicated_max_ratio_of_wrong_parts>1</replicated_max_ratio_of_wrong_parts>
    </merge_tree>
{{- end}}
</yandex>
`))

// The least-privilege users of the embedded server (docs/access.md),
// beside default (the administrator, which migrates):
const (
	// ReaderUser is the query service's: profile readonly, readonly=2
	// (no write and no DDL; settings may still be sent with a query, which
	// the client does with every one).
	ReaderUser = "driftline_reader"
	// WriterUser is the joiner's and the rater's: they write the read
	// model; they do not migrate it.
	WriterUser = "driftline_writer"
	// AuditUser appends the query service's audit_log. 18.16 has no
	// grants per table, so on it the user may write the database; on
	// current releases it holds INSERT and SELECT on audit_log alone.
	AuditUser = "driftline_audit"
)

// usersXML lets the users in without a password, from loopback only: the
// server listens on 127.0.0.1 alone, and the network list keeps it that
// way should the listen address ever widen.
var usersXML = `<?xml version="1.0"?>
<!-- Written by chserver.Start on every start; edits are overwritten. -->
<yandex>
    <profiles>
        <default>
            <load_balancing>random</load_balancing>
` + lowCardinalitySetting + `
        </default>
        <readonly>
            <load_balancing>random</load_balancing>
            <readonly>2</readonly>
        </readonly>
    </profiles>
    <users>
` + userXML("default", "default") + userXML(ReaderUser, "readonly") + userXML(WriterUser, "default") + userXML(AuditUser, "default") + `    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
`

// userXML is one user of usersXML: no password, loopback only, with the
// given profile.
func userXML(name, profile string) string {
	return `        <` + name + `>
            <password></password>
            <networks>
                <ip>127.0.0.1</ip>
                <ip>::1</ip>
            </networks>
            <profile>` + profile + `</profile>
            <quota>default</quota>
        </` + name + `>
`
}

// lowCardinalitySetting is the line of the default profile that a
// cluster member's profile settings follow.
const lowCardinalitySetting = `            <low_cardinality_allow_in_native_format>0</low_cardinality_allow_in_native_format>`

// In a cluster member's profiles load_balancing is in_order: Distributed
// tables write to and read from the first live replica of each shard, so
// a read follows the write before it while that replica lives (random
// would read the other replica before it fetched the write).
//
// clusterProfile replaces lowCardinalitySetting in a cluster member's
// default profile. 18.16 checks the header a shard answers an insert or a
// read of a Distributed table with against the types of the Distributed
// table, and the shard (which takes its settings from this profile, not
// from the query) must then keep LowCardinality in the native format: a
// client's own query still asks for plain strings. It keeps a member small, for four of them and
// ZooKeeper on a developer's machine: the background pools that merge and
// fetch parts (16 threads each by default) and the memory of one query.
// Reads through a Distributed table that name another Distributed table in
// a subquery run it once, globally, instead of failing. DDL ON CLUSTER
// runs on each member with the default profile, not the settings of the
// query that queued it, so 18.16 needs LowCardinality allowed there.
const clusterProfile = `            <low_cardinality_allow_in_native_format>1</low_cardinality_allow_in_native_format>
            <allow_experimental_low_cardinality_type>1</allow_experimental_low_cardinality_type>
            <background_pool_size>4</background_pool_size>
            <background_schedule_pool_size>4</background_schedule_pool_size>
            <max_memory_usage>2000000000</max_memory_usage>
            <distributed_product_mode>global</distributed_product_mode>`

type configData struct {
	LogLevel         string
	Log, ErrorLog    string
	TCPPort          int
	HTTPPort         int
	Path             string
	TmpPath          string
	UserFilesPath    string
	FormatSchemaPath string
	UsersConfig      string
	MarkCacheSize    int64
	MaxMemory        int64
	Cluster          *clusterData
	InterserverPort  int
	ZKSessionMS      int64
}

// clusterData is Options.Cluster in the shape of the config.
type clusterData struct {
	Name           string
	Shard, Replica string
	Shards         [][]hostPort
	ZooKeeper      []hostPort
}

type hostPort struct {
	Host string
	Port int
}

func splitHostPorts(addrs []string) ([]hostPort, error) {
	out := make([]hostPort, 0, len(addrs))
	for _, a := range addrs {
		h, p, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("cluster address %q: %w", a, err)
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("cluster address %q: port: %w", a, err)
		}
		out = append(out, hostPort{h, n})
	}
	return out, nil
}

func newClusterData(c *Cluster) (*clusterData, error) {
	if c == nil {
		return nil, nil
	}
	d := &clusterData{Name: c.Name, Shard: c.Shard, Replica: c.Replica}
	for _, sh := range c.Shards {
		hp, err := splitHostPorts(sh)
		if err != nil {
			return nil, err
		}
		d.Shards = append(d.Shards, hp)
	}
	zk, err := splitHostPorts(c.ZooKeeper)
	if err != nil {
		return nil, err
	}
	d.ZooKeeper = zk
	return d, nil
}

// writeConfig creates the directory layout under dir and writes the
// config files. Existing data is kept: only the two config files are
// rewritten, so a restart picks up changed options.
func writeConfig(dir string, o Options) error {
	for _, d := range []string{dataDir, tmpDir, userFiles, formatDir, logDir} {
		if err := os.MkdirAll(filepath.Join(dir, d), dirFileMode); err != nil {
			return fmt.Errorf("create server directory: %w", err)
		}
	}
	// ClickHouse requires the trailing slash on directory paths.
	slash := func(d string) string { return filepath.Join(dir, d) + string(filepath.Separator) }
	cluster, err := newClusterData(o.Cluster)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	err = configTmpl.Execute(&buf, configData{
		LogLevel:         o.LogLevel,
		Log:              filepath.Join(dir, logDir, serverLog),
		ErrorLog:         filepath.Join(dir, logDir, errorLog),
		TCPPort:          o.TCPPort,
		HTTPPort:         o.HTTPPort,
		Path:             slash(dataDir),
		TmpPath:          slash(tmpDir),
		UserFilesPath:    slash(userFiles),
		FormatSchemaPath: slash(formatDir),
		UsersConfig:      filepath.Join(dir, usersFile),
		MarkCacheSize:    o.CacheSize,
		MaxMemory:        o.MaxMemory,
		Cluster:          cluster,
		InterserverPort:  o.InterserverPort,
		ZKSessionMS:      zkSessionTimeout.Milliseconds(),
	})
	if err != nil {
		panic("BUG: config template: " + err.Error())
	}
	if err := writeFile(filepath.Join(dir, configFile), buf.Bytes()); err != nil {
		return err
	}
	users := usersXML
	if o.Cluster != nil {
		users = strings.Replace(users, lowCardinalitySetting, clusterProfile, 1)
		users = strings.ReplaceAll(users, "<load_balancing>random</load_balancing>", "<load_balancing>in_order</load_balancing>")
	}
	return writeFile(filepath.Join(dir, usersFile), []byte(users))
}

// writeFile replaces name atomically, so a server reloading its config
// never reads half a file.
func writeFile(name string, data []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, 0o640); err != nil {
		return fmt.Errorf("write server config: %w", err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("write server config: %w", err)
	}
	return nil
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s)) // writing to a bytes.Buffer cannot fail
	return b.String()
}
