package service

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
)

// writeServerCert writes a CA and a 127.0.0.1 server certificate signed by
// it into dir, and returns the CA's path and the server's TLS config.
func writeServerCert(t *testing.T, dir string) (caPath string, srv *tls.Config) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kafka test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
	if err != nil {
		t.Fatal(err)
	}
	caPath = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caPath, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}

// TestKafkaSecuredReplicatedTopics starts three TLS brokers that require
// SCRAM-SHA-512 and creates the pipeline's topics through the shared
// flags, as every binary does: replication 3 and min.insync.replicas 2
// reach the topics, and without TLS or with a wrong password nothing
// connects.
func TestKafkaSecuredReplicatedTopics(t *testing.T) {
	dir := t.TempDir()
	caPath, srvTLS := writeServerCert(t, dir)
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.TLS(srvTLS), kfake.EnableSASL(),
		kfake.Superuser(SASLScramSHA512, "driftline", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pwFile := filepath.Join(dir, "password")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	common := func(t *testing.T, args ...string) (*Common, error) {
		t.Helper()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		cm := RegisterFlags(fs)
		if err := fs.Parse(append([]string{"-kafka.brokers", strings.Join(c.ListenAddrs(), ",")}, args...)); err != nil {
			t.Fatal(err)
		}
		return cm, cm.Validate()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	good := []string{"-kafka.tls.ca", caPath, "-kafka.sasl.mechanism", SASLScramSHA512,
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
		{"-kafka.tls.ca", caPath, "-kafka.sasl.mechanism", SASLScramSHA512, "-kafka.sasl.user", "driftline", "-kafka.sasl.password", "wrong"},
		{"-kafka.sasl.mechanism", SASLScramSHA512, "-kafka.sasl.user", "driftline", "-kafka.sasl.password", "s3cret"},
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
		{[]string{"-kafka.sasl.mechanism", SASLScramSHA256, "-kafka.sasl.user", "u"}, "needs -kafka.sasl.user and a password"},
		{[]string{"-kafka.sasl.mechanism", SASLScramSHA256, "-kafka.sasl.user", "u", "-kafka.sasl.password", "p", "-kafka.sasl.passwordFile", pw}, "both set"},
		{[]string{"-kafka.sasl.mechanism", SASLScramSHA256, "-kafka.sasl.user", "u", "-kafka.sasl.passwordFile", pw}, ""},
		{[]string{"-kafka.tls.ca", filepath.Join(dir, "missing.pem")}, "read CA"},
		{[]string{"-kafka.tls.cert", pw}, "both its certificate and its key"},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		cm := RegisterFlags(fs)
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
	dir := t.TempDir()
	caPath, _ := writeServerCert(t, dir)
	if cfg, err := (ClickHouseTLS{}).Config(); cfg != nil || err != nil {
		t.Errorf("TLS off: %v, %v", cfg, err)
	}
	cfg, err := ClickHouseTLS{CA: caPath, ServerName: "ch.internal"}.Config()
	if err != nil || cfg == nil || cfg.RootCAs == nil || cfg.ServerName != "ch.internal" {
		t.Errorf("with a CA: %+v, %v", cfg, err)
	}
	if _, err := (ClickHouseTLS{Enabled: true, Key: caPath}).Config(); err == nil {
		t.Error("a key without a certificate was accepted")
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cm := RegisterFlags(fs)
	if err := fs.Parse([]string{"-clickhouse.tls", "-clickhouse.tls.ca", caPath}); err != nil {
		t.Fatal(err)
	}
	if !cm.ClickHouse.TLS.Enabled || cm.ClickHouse.TLS.CA != caPath {
		t.Errorf("flags: %+v", cm.ClickHouse.TLS)
	}
}
