package service

import (
	"crypto/tls"
	"flag"
)

// ClickHouseTLS says how to reach ClickHouse over TLS (its secure native
// port, 9440 by default).
//
//	DRIFTLINE_CLICKHOUSE_TLS             true: connect with TLS
//	DRIFTLINE_CLICKHOUSE_TLS_CA          PEM CA bundle of the server
//	DRIFTLINE_CLICKHOUSE_TLS_CERT        PEM client certificate
//	DRIFTLINE_CLICKHOUSE_TLS_KEY         its private key
//	DRIFTLINE_CLICKHOUSE_TLS_SERVER_NAME name checked in the server's certificate
type ClickHouseTLS struct {
	// Enabled turns TLS on; a CA or a client certificate implies it.
	Enabled bool
	// CA is a PEM CA bundle that signs the server's certificate; empty
	// trusts the system roots.
	CA string
	// Cert and Key are a PEM client certificate and its key, for servers
	// that authenticate users by certificate.
	Cert, Key string
	// ServerName is the name checked in the server's certificate; empty
	// checks the host of -clickhouse.addr.
	ServerName string
}

// registerClickHouseTLS registers the -clickhouse.tls* flags into t.
func registerClickHouseTLS(fs *flag.FlagSet, t *ClickHouseTLS) {
	fs.BoolVar(&t.Enabled, "clickhouse.tls", envBool("DRIFTLINE_CLICKHOUSE_TLS"), "connect to ClickHouse with TLS (its secure native port, 9440 by default; implied by -clickhouse.tls.ca, -clickhouse.tls.cert)")
	fs.StringVar(&t.CA, "clickhouse.tls.ca", Env("DRIFTLINE_CLICKHOUSE_TLS_CA", ""), "PEM CA bundle that signs the ClickHouse server's certificate; empty trusts the system roots")
	fs.StringVar(&t.Cert, "clickhouse.tls.cert", Env("DRIFTLINE_CLICKHOUSE_TLS_CERT", ""), "PEM client certificate for ClickHouse (with -clickhouse.tls.key)")
	fs.StringVar(&t.Key, "clickhouse.tls.key", Env("DRIFTLINE_CLICKHOUSE_TLS_KEY", ""), "PEM private key of -clickhouse.tls.cert")
	fs.StringVar(&t.ServerName, "clickhouse.tls.serverName", Env("DRIFTLINE_CLICKHOUSE_TLS_SERVER_NAME", ""), "name checked in the ClickHouse server's certificate; empty checks the host of -clickhouse.addr")
}

// Config returns the TLS configuration of the connection, or nil when TLS
// is off.
func (t ClickHouseTLS) Config() (*tls.Config, error) {
	if !t.Enabled && t.CA == "" && t.Cert == "" && t.Key == "" && t.ServerName == "" {
		return nil, nil
	}
	return ClientTLSConfig(t.CA, t.Cert, t.Key, t.ServerName)
}
