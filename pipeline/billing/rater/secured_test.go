package rater_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
)

// TestBinaryOverTLSAndSCRAM runs the rater binary against three brokers
// that take only TLS and SCRAM-SHA-512, with the security and
// replication flags every binary shares: it creates the topics with
// replication 3 and min.insync.replicas 2, joins its group, and rates
// every usage event exactly once in transactions over the secured
// connections.
func TestBinaryOverTLSAndSCRAM(t *testing.T) {
	rater := buildRater(t)
	dir := t.TempDir()
	caPath, srvTLS := testenv.ServerTLS(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.TLS(srvTLS), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "rater", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	pw := filepath.Join(dir, "password")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := rater.start("-kafka.brokers", strings.Join(brokers, ","), "-kafka.partitions", "3",
		"-kafka.replicationFactor", "3", "-kafka.minInsyncReplicas", "2",
		"-kafka.tls.ca", caPath, "-kafka.sasl.mechanism", "SCRAM-SHA-512", "-kafka.sasl.user", "rater", "-kafka.sasl.passwordFile", pw,
		"-billing.enabled=false", "-rater.priceBook", rater.book, "-rater.addr", "127.0.0.1:0")

	tlsCfg, err := secureTLS(caPath)
	if err != nil {
		t.Fatal(err)
	}
	secured := []kgo.Opt{kgo.DialTLSConfig(tlsCfg), kgo.SASL(scram.Auth{User: "rater", Pass: "s3cret"}.AsSha512Mechanism())}
	cl := testenv.KafkaClient(t, brokers, secured...)
	names := contract.DefaultTopics()
	adm := kadm.NewClient(cl)
	// The rater creates the topics; wait for them.
	testenv.CheckFor(t, time.Minute, func() error {
		td, err := adm.ListTopics(context.Background(), names.Usage, names.Rated)
		if err != nil {
			return err
		}
		for _, name := range []string{names.Usage, names.Rated} {
			d, ok := td[name]
			if !ok || d.Err != nil || len(d.Partitions) != 3 {
				return fmt.Errorf("%s not created yet", name)
			}
			for _, p := range d.Partitions {
				if len(p.Replicas) != 3 {
					return fmt.Errorf("%s[%d] has %d replicas, want 3", name, p.Partition, len(p.Replicas))
				}
			}
		}
		return nil
	})

	const n = 500
	rs := make([]*kgo.Record, n)
	for i := range rs {
		u := usage{eventID: fmt.Sprintf("e-%04d", i), usageID: fmt.Sprintf("usage-%04d", i), source: "meter",
			meteringID: fmt.Sprintf("m-%04d", i), unit: "gpu_hour", quantity: "1.000000", tenant: "t1"}
		rs[i] = &kgo.Record{Topic: names.Usage, Key: []byte(u.key()), Value: u.encode()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	read := func() map[string]int {
		rc := testenv.KafkaClient(t, brokers, append([]kgo.Opt{kgo.ConsumeTopics(names.Rated),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, secured...)...)
		defer rc.Close()
		seen := map[string]int{}
		for {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := rc.PollFetches(pctx)
			pcancel()
			if fs.Empty() {
				return seen
			}
			fs.EachRecord(func(r *kgo.Record) { seen[decodeRated(t, r).Payload.UsageID]++ })
		}
	}
	testenv.CheckFor(t, time.Minute, func() error {
		if got := len(read()); got < n {
			return fmt.Errorf("%d usage_ids rated, want %d", got, n)
		}
		return nil
	})
	rater.stop(cmd)
	seen := read()
	if len(seen) != n {
		t.Errorf("%d usage_ids rated, want %d", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("%s rated %d times", id, k)
		}
	}
}

// secureTLS trusts the CA at caPath.
func secureTLS(caPath string) (*tls.Config, error) {
	pemBytes, err := os.ReadFile(caPath)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("no certificate in %s", caPath)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
