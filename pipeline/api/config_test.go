package api_test

import (
	"errors"
	"flag"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/access"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/service"
)

// parseConfig parses args with the query service's flags and prepares the
// config for env.
func parseConfig(t *testing.T, env string, args ...string) (api.Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	common := service.RegisterFlags(fs)
	cfg := api.DefaultConfig()
	cfg.RegisterFlags(fs)
	if err := fs.Parse(append([]string{"-env", env}, args...)); err != nil {
		t.Fatal(err)
	}
	return cfg, cfg.Prepare(common)
}

func TestConfigFlags(t *testing.T) {
	for _, v := range []string{"DRIFTLINE_QUERY_ADDR", "DRIFTLINE_QUERY_ALLOW_ORIGINS", "DRIFTLINE_QUERY_CLIENT_CA", "DRIFTLINE_QUERY_TLS_CERT", "DRIFTLINE_QUERY_TLS_KEY"} {
		t.Setenv(v, "")
	}
	cfg, err := parseConfig(t, contract.EnvDev)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Serve.Addr != service.DefaultQueryAddr || cfg.WaitConsumer != api.DefaultJoinerGroup || cfg.QueryTimeout != 10*time.Second ||
		cfg.Alert.Interval != 15*time.Second || cfg.Serve.TLS != nil || cfg.AllowOrigins != nil || cfg.Environment != contract.EnvDev {
		t.Errorf("defaults: %+v", cfg)
	}

	cfg, err = parseConfig(t, contract.EnvDev, "-query.allowOrigins", " https://a.example, ,https://b.example", "-query.joinerGroup", "g2",
		"-alert.webhook", "http://am1/api/v2/alerts", "-alert.webhook", "http://am2/api/v2/alerts", "-query.joinerPartitions", "4", "-query.idleTimeout", "7s")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"https://a.example", "https://b.example"}; !slices.Equal(cfg.AllowOrigins, want) {
		t.Errorf("AllowOrigins = %q, want %q", cfg.AllowOrigins, want)
	}
	if cfg.WaitConsumer != "g2" || cfg.WaitPartitions != 4 || len(cfg.Alert.Webhooks) != 2 || cfg.Serve.IdleTimeout != 7*time.Second {
		t.Errorf("set: %+v", cfg)
	}
	if got := cfg.AlertOptions().GeneratorURL; got != "http://"+service.DefaultQueryAddr+"/ui/" {
		t.Errorf("GeneratorURL = %q", got)
	}

	if _, err := parseConfig(t, contract.EnvProd); !errors.Is(err, access.ErrProdWithoutMTLS) {
		t.Errorf("prod without -query.clientCA: err %v, want %v", err, access.ErrProdWithoutMTLS)
	}
	if _, err := parseConfig(t, "staging"); err == nil {
		t.Error("-env staging: no error")
	}
}

func TestConfigAuditClickHouse(t *testing.T) {
	cfg, ch := api.DefaultConfig(), service.ClickHouse{User: "reader", Password: "r"}
	if _, ok := cfg.AuditClickHouse(ch); ok {
		t.Error("no audit user: a second connection")
	}
	cfg.AuditUser, cfg.AuditPassword = "reader", "x"
	if _, ok := cfg.AuditClickHouse(ch); ok {
		t.Error("audit user = reading user: a second connection")
	}
	cfg.AuditUser = "auditor"
	if got, ok := cfg.AuditClickHouse(ch); !ok || got.User != "auditor" || got.Password != "x" {
		t.Errorf("audit user: %+v %v", got, ok)
	}
}
