package chserver

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"text/template"
)

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
            <low_cardinality_allow_in_native_format>0</low_cardinality_allow_in_native_format>
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
	var buf bytes.Buffer
	err := configTmpl.Execute(&buf, configData{
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
	})
	if err != nil {
		panic("BUG: config template: " + err.Error())
	}
	if err := writeFile(filepath.Join(dir, configFile), buf.Bytes()); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, usersFile), []byte(usersXML))
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
