package api

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/api/access"
	"github.com/driftline/driftline/pipeline/api/alert"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
	"github.com/driftline/driftline/pipeline/service"
)

// Config is what the query service's command line (cmd/query) sets: the
// server's Options, how it is served, and the settings of the process
// around it (keys, TLS, the audit user, alerts). DefaultConfig has the
// defaults; RegisterFlags binds them to flags.
type Config struct {
	// Options configure the Server. The command builds DB, Guard,
	// Auditor, Registry, Lag, Commands, Actions and Events.
	Options
	// Serve configures Server.Serve; Prepare builds its TLS.
	Serve ServeOptions
	// JoinerGroup is the consumer group of the joiner, whose lag
	// /v1/status reports and whose watermark wait_watermark awaits
	// (Options.WaitConsumer); empty reports no lag. Default
	// DefaultJoinerGroup.
	JoinerGroup string
	// EventsTimeout bounds reading a node page's recent events from
	// Kafka (NewKafkaEvents). Default 2s.
	EventsTimeout time.Duration
	// KeysFile is the keys file (the ingest gateway's format, with roles,
	// tenant_ids and authority_levels; docs/access.md): required in dev
	// and prod; empty in local_parity admits only the built-in local key,
	// as admin.
	KeysFile string
	// KeysReloadInterval is how often the keys file is checked for
	// changes (access.Guard.Watch); 0 reloads on SIGHUP only. Default 5s.
	KeysReloadInterval time.Duration
	// TLSCert and TLSKey are the PEM certificate and key of the server;
	// ClientCA, the PEM CA bundle of client certificates, turns on mTLS.
	// All three are required in prod.
	TLSCert, TLSKey, ClientCA string
	// Origins are the comma-separated origins of Options.AllowOrigins, as
	// the command line writes them; Prepare splits them.
	Origins string
	// AuditUser and AuditPassword are the ClickHouse user that appends to
	// audit_log and to the action and alert logs. Default none: the
	// reading user, which must then be allowed to insert.
	AuditUser, AuditPassword string
	// Alert configures the alert sender; with no Webhooks none runs.
	Alert alert.Options
}

// DefaultConfig returns Config with every default written out.
func DefaultConfig() Config {
	return Config{Options: DefaultOptions(), Serve: DefaultServeOptions(), JoinerGroup: DefaultJoinerGroup,
		EventsTimeout: 2 * time.Second, KeysReloadInterval: 5 * time.Second, Alert: alert.DefaultOptions()}
}

// RegisterFlags registers the flags of c on fs (-query.*, -alert.*) with
// c's values as their defaults, or the DRIFTLINE_QUERY_* environment
// variable each names where it is set.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Serve.Addr, "query.addr", service.Env("DRIFTLINE_QUERY_ADDR", c.Serve.Addr), "HTTP listen address of the query API (env DRIFTLINE_QUERY_ADDR)")
	fs.StringVar(&c.JoinerGroup, "query.joinerGroup", c.JoinerGroup, "consumer group of the joiner, whose lag /v1/status reports; empty reports no lag")
	fs.DurationVar(&c.QueryTimeout, "query.timeout", c.QueryTimeout, "bound on the ClickHouse work of one request; raise it for very large listings")
	fs.DurationVar(&c.LagTimeout, "query.lagTimeout", c.LagTimeout, "bound on asking the broker for lag; past it /v1/status reports the lag unknown instead of waiting")
	fs.DurationVar(&c.MaxWait, "query.maxWait", c.MaxWait, "upper bound on a request's wait_timeout (read-your-writes); longer waits hold connections open")
	fs.IntVar(&c.WaitPartitions, "query.joinerPartitions", c.WaitPartitions, "partitions the joiner reports in consumer_progress; wait_watermark waits for at least this many, so set it to the topics' partition count")
	fs.Func("alert.webhook", "Alertmanager v2 URL (http://host:9093/api/v2/alerts) to push alerts to (CONTRACT 9.3); repeat for several receivers; none sends no alerts", func(v string) error {
		c.Alert.Webhooks = append(c.Alert.Webhooks, v)
		return nil
	})
	fs.DurationVar(&c.Alert.Interval, "alert.interval", c.Alert.Interval, "how often alert conditions are read; shorter alerts sooner, each round reads drift_evidence with FINAL")
	fs.Int64Var(&c.Alert.LagSLO, "alert.lagSLO", c.Alert.LagSLO, "consumer lag (records) of the joiner group above which an alert fires")
	fs.DurationVar(&c.EventsTimeout, "query.eventsTimeout", c.EventsTimeout, "bound on reading a node page's recent events from Kafka; past it they show as unavailable and the page is still served")
	fs.DurationVar(&c.Serve.ShutdownTimeout, "query.shutdownTimeout", c.Serve.ShutdownTimeout, "how long in-flight requests may finish after SIGTERM before they are cut")
	fs.StringVar(&c.KeysFile, "query.keysFile", service.Env("DRIFTLINE_QUERY_KEYS_FILE", c.KeysFile), "keys file (the ingest gateway's format; entries with roles, tenant_ids, authority_levels; env DRIFTLINE_QUERY_KEYS_FILE): required in dev and prod; empty in local_parity admits only the built-in local key, as admin")
	fs.DurationVar(&c.KeysReloadInterval, "query.keysReloadInterval", c.KeysReloadInterval, "how often the keys file is checked for changes (SIGHUP reloads at once); a change starts a new policy_rev. 0 reloads on SIGHUP only")
	fs.StringVar(&c.TLSCert, "query.tlsCert", service.Env("DRIFTLINE_QUERY_TLS_CERT", c.TLSCert), "PEM certificate of the query API; with -query.tlsKey serves HTTPS")
	fs.StringVar(&c.TLSKey, "query.tlsKey", service.Env("DRIFTLINE_QUERY_TLS_KEY", c.TLSKey), "PEM private key of -query.tlsCert")
	fs.StringVar(&c.ClientCA, "query.clientCA", service.Env("DRIFTLINE_QUERY_CLIENT_CA", c.ClientCA), "PEM CA bundle for client certificates: turns on mTLS (every connection must present a certificate it signed; the bearer key still decides the roles). Required in prod")
	fs.IntVar(&c.MaxConcurrent, "query.maxConcurrent", c.MaxConcurrent, "requests served at once; beyond it the API answers 503 with Retry-After at once instead of queueing on ClickHouse")
	fs.IntVar(&c.MaxExportRows, "query.maxExportRows", c.MaxExportRows, "rows of an Arrow or CSV export that gives no limit; a larger selection is cut there (header Driftline-Export-Row-Cap). More costs ClickHouse and network time per export")
	fs.StringVar(&c.Origins, "query.allowOrigins", service.Env("DRIFTLINE_QUERY_ALLOW_ORIGINS", c.Origins), "comma-separated origins whose web pages may call the API (CORS); empty: none but the UI this server serves")
	fs.DurationVar(&c.Serve.WriteTimeout, "query.writeTimeout", c.Serve.WriteTimeout, "bound on writing one answer, exports included; lower frees connections held by slow readers sooner, but cuts large exports")
	fs.DurationVar(&c.Serve.IdleTimeout, "query.idleTimeout", c.Serve.IdleTimeout, "how long an idle keep-alive connection is kept")
	fs.StringVar(&c.AuditUser, "query.auditUser", service.Env("DRIFTLINE_QUERY_AUDIT_USER", c.AuditUser), "ClickHouse user that appends to audit_log and to the action and alert logs (action_commands, alert_deliveries) (env DRIFTLINE_QUERY_AUDIT_USER); empty: -clickhouse.user. With a read-only -clickhouse.user it must be another user")
	fs.StringVar(&c.AuditPassword, "query.auditPassword", service.Env("DRIFTLINE_QUERY_AUDIT_PASSWORD", c.AuditPassword), "password of -query.auditUser (env DRIFTLINE_QUERY_AUDIT_PASSWORD)")
}

// Prepare checks the shared settings the query service uses (the
// environment, the Kafka security flags) and c for them, and completes c
// once the flags are parsed: prod requires mTLS
// (access.ErrProdWithoutMTLS), Serve.TLS is built from TLSCert, TLSKey
// and ClientCA when any is set, Origins are split into
// Options.AllowOrigins, a JoinerGroup becomes the consumer whose
// watermark waits await, and Topics and Environment are common's. The
// broker is optional: no brokers is not an error.
func (c *Config) Prepare(common *service.Common) error {
	if !contract.ValidEnvironment(common.Environment) {
		return fmt.Errorf("-env %q: must be local_parity, dev or prod", common.Environment)
	}
	if err := common.Kafka.Validate(); err != nil {
		return err
	}
	if common.Environment == contract.EnvProd && c.ClientCA == "" {
		return access.ErrProdWithoutMTLS
	}
	if c.TLSCert != "" || c.TLSKey != "" || c.ClientCA != "" {
		var err error
		if c.Serve.TLS, err = service.ServerTLSConfig(c.TLSCert, c.TLSKey, c.ClientCA); err != nil {
			return fmt.Errorf("-query.tlsCert/-query.tlsKey/-query.clientCA: %w", err)
		}
	}
	for _, o := range strings.Split(c.Origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			c.AllowOrigins = append(c.AllowOrigins, o)
		}
	}
	if c.JoinerGroup != "" {
		c.WaitConsumer = c.JoinerGroup
	}
	c.Topics, c.Environment = common.Topics, common.Environment
	return nil
}

// OpenGuard loads KeysFile (in local_parity without one, the built-in
// local key) into the guard of the environment's policy.
func (c *Config) OpenGuard() (*access.Guard, *keys.Keyring, error) {
	kr, err := keys.OpenKeyring(c.Environment, c.KeysFile, service.DefaultLocalAPIKey)
	if err != nil {
		return nil, nil, err
	}
	guard, err := access.NewGuard(access.GuardOptions{Environment: c.Environment, LocalKey: service.DefaultLocalAPIKey,
		MTLS: c.ClientCA != ""}, kr)
	return guard, kr, err
}

// ConnectKafka sets c's Kafka clients up, when common names brokers (the
// broker is optional for a read-only API): Lag and LagGroups ask for the
// joiner group's lag (without a JoinerGroup the status reports lag as
// not configured); Commands takes operator actions as commands on the
// commands topic (acks=all, the murmur2 partitioner, keyed by the
// finding's identity; without a broker the action endpoints answer 503);
// Events reads a node page's recent events by coordinate through the
// same client (one Fetch per record, no consumer group). closeAll closes
// the clients.
func (c *Config) ConnectKafka(common *service.Common) (closeAll func(), err error) {
	var cls []*kgo.Client
	closeAll = func() {
		for _, cl := range cls {
			cl.Close()
		}
	}
	if len(common.SeedBrokers()) == 0 {
		return closeAll, nil
	}
	if c.JoinerGroup != "" {
		kcl, err := common.KafkaClient()
		if err != nil {
			return closeAll, err
		}
		cls = append(cls, kcl)
		c.Lag, c.LagGroups = kadm.NewClient(kcl), []string{c.JoinerGroup}
	}
	ccl, err := common.KafkaClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		return closeAll, err
	}
	cls = append(cls, ccl)
	c.Commands, c.Events = ccl, NewKafkaEvents(ccl, c.EventsTimeout)
	return closeAll, nil
}

// AuditClickHouse returns the ClickHouse settings of AuditUser, and false
// when the reading user (ch's) writes the audit log itself.
func (c *Config) AuditClickHouse(ch service.ClickHouse) (service.ClickHouse, bool) {
	if c.AuditUser == "" || c.AuditUser == ch.User {
		return ch, false
	}
	ch.User, ch.Password = c.AuditUser, c.AuditPassword
	return ch, true
}

// AlertOptions returns the options of the alert sender: Alert, linked to
// the UI at Serve.Addr and alerting on the lag of LagGroups when Lag is
// set.
func (c *Config) AlertOptions() alert.Options {
	o := c.Alert
	o.GeneratorURL = "http://" + c.Serve.Addr + "/ui/"
	if c.Lag != nil {
		o.Lag = LagTotals(c.Lag, c.LagGroups)
	}
	return o
}

// LagTotals returns the total lag of each of groups, asked through lag,
// as the alert sender takes it (alert.Options.Lag); a group whose lag
// could not be read fails the whole answer.
func LagTotals(lag Lagger, groups []string) alert.Lagger {
	return func(ctx context.Context) (map[string]int64, error) {
		lags, err := lag.Lag(ctx, groups...)
		if err != nil {
			return nil, err
		}
		out := map[string]int64{}
		for g, l := range lags {
			if err := l.Error(); err != nil {
				return nil, err
			}
			out[g] = l.Lag.Total()
		}
		return out, nil
	}
}
