package service_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/service"
)

// TestKafkaSecuredReplicatedTopics starts three TLS brokers that require
// SCRAM-SHA-512 and creates the pipeline's topics through the shared
// flags, as every binary does: replication 3 and min.insync.replicas 2
// reach the topics, and without TLS or with a wrong password nothing
// connects.
func TestKafkaSecuredReplicatedTopics(t *testing.T) {
	dir := t.TempDir()
	caPath, srvTLS := testenv.ServerTLS(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.TLS(srvTLS), kfake.EnableSASL(),
		kfake.Superuser(service.SASLScramSHA512, "driftline", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pwFile := filepath.Join(dir, "password")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	common := func(t *testing.T, args ...string) (*service.Common, error) {
		t.Helper()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		cm := service.RegisterFlags(fs)
		if err := fs.Parse(append([]string{"-kafka.brokers", strings.Join(c.ListenAddrs(), ",")}, args...)); err != nil {
			t.Fatal(err)
		}
		return cm, cm.Validate()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	good := []string{"-kafka.tls.ca", caPath, "-kafka.sasl.mechanism", service.SASLScramSHA512,
		"-kafka.sasl.user", "driftline", "-kafka.sasl.passwordFile", pwFile,
		"-kafka.replicationFactor", "3", "-kafka.minInsyncReplicas", "2"}
	cm, err := common(t, good...)
	if err != nil {
		t.Fatal(err)
	}
	if err := cm.EnsureTopics(ctx); err != nil {
		t.Fatalf("ensure topics over TLS and SCRAM: %v", err)
	}
	cl, err := cm.KafkaClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	names := cm.Topics.Joined()
	td, err := adm.ListTopics(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		for _, p := range td[name].Partitions {
			if len(p.Replicas) != 3 {
				t.Fatalf("%s[%d] has %d replicas, want 3", name, p.Partition, len(p.Replicas))
			}
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		got := ""
		for _, cfg := range rc.Configs {
			if cfg.Key == "min.insync.replicas" {
				got = cfg.MaybeValue()
			}
		}
		if got != "2" {
			t.Fatalf("%s: min.insync.replicas %q, want 2", rc.Name, got)
		}
	}

	// Wrong password, and no TLS: the same step fails.
	for _, bad := range [][]string{
		{"-kafka.tls.ca", caPath, "-kafka.sasl.mechanism", service.SASLScramSHA512, "-kafka.sasl.user", "driftline", "-kafka.sasl.password", "wrong"},
		{"-kafka.sasl.mechanism", service.SASLScramSHA512, "-kafka.sasl.user", "driftline", "-kafka.sasl.password", "s3cret"},
	} {
		cm, err := common(t, bad...)
		if err != nil {
			t.Fatal(err)
		}
		bctx, bcancel := context.WithTimeout(ctx, 3*time.Second)
		if _, err := cm.PartitionCount(bctx, cm.Topics.Observations); err == nil {
			t.Errorf("%v: connected, want a failure", bad)
		}
		bcancel()
	}
}

func TestKafkaValidate(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string // substring of the error; empty: valid
	}{
		{nil, ""},
		{[]string{"-kafka.replicationFactor", "-1", "-kafka.minInsyncReplicas", "0"}, ""},
		{[]string{"-kafka.replicationFactor", "3", "-kafka.minInsyncReplicas", "2"}, ""},
		{[]string{"-kafka.replicationFactor", "0"}, "-kafka.replicationFactor 0"},
		{[]string{"-kafka.replicationFactor", "2", "-kafka.minInsyncReplicas", "3"}, "exceeds"},
		{[]string{"-kafka.minInsyncReplicas", "-1"}, "-kafka.minInsyncReplicas -1"},
		{[]string{"-kafka.sasl.user", "u"}, "without -kafka.sasl.mechanism"},
		{[]string{"-kafka.sasl.mechanism", "GSSAPI", "-kafka.sasl.user", "u", "-kafka.sasl.password", "p"}, "must be"},
		{[]string{"-kafka.sasl.mechanism", service.SASLScramSHA256, "-kafka.sasl.user", "u"}, "needs -kafka.sasl.user and a password"},
		{[]string{"-kafka.sasl.mechanism", service.SASLScramSHA256, "-kafka.sasl.user", "u", "-kafka.sasl.password", "p", "-kafka.sasl.passwordFile", pw}, "both set"},
		{[]string{"-kafka.sasl.mechanism", service.SASLScramSHA256, "-kafka.sasl.user", "u", "-kafka.sasl.passwordFile", pw}, ""},
		{[]string{"-kafka.tls.ca", filepath.Join(dir, "missing.pem")}, "read CA"},
		{[]string{"-kafka.tls.cert", pw}, "both its certificate and its key"},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		cm := service.RegisterFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := cm.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

func TestClickHouseTLSConfig(t *testing.T) {
	caPath, _ := testenv.ServerTLS(t)
	if cfg, err := (service.ClickHouseTLS{}).Config(); cfg != nil || err != nil {
		t.Errorf("TLS off: %v, %v", cfg, err)
	}
	cfg, err := service.ClickHouseTLS{CA: caPath, ServerName: "ch.internal"}.Config()
	if err != nil || cfg == nil || cfg.RootCAs == nil || cfg.ServerName != "ch.internal" {
		t.Errorf("with a CA: %+v, %v", cfg, err)
	}
	if _, err := (service.ClickHouseTLS{Enabled: true, Key: caPath}).Config(); err == nil {
		t.Error("a key without a certificate was accepted")
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cm := service.RegisterFlags(fs)
	if err := fs.Parse([]string{"-clickhouse.tls", "-clickhouse.tls.ca", caPath}); err != nil {
		t.Fatal(err)
	}
	if !cm.ClickHouse.TLS.Enabled || cm.ClickHouse.TLS.CA != caPath {
		t.Errorf("flags: %+v", cm.ClickHouse.TLS)
	}
}
