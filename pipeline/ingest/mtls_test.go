package ingest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// testCA issues certificates for the mTLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
	n    int64
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "driftline test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), n: 1}
}

// issue returns a leaf certificate; server certificates are for 127.0.0.1.
func (ca *testCA) issue(t *testing.T, cn string, uri string, server bool) (tls.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.n++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.n), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	if uri != "" {
		u, err := url.Parse(uri)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair, certPEM, keyPEM
}

func TestProdRequiresMTLS(t *testing.T) {
	kr, err := NewKeyringWithClients(nil, []ClientSpec{{Identity: "cn:x", Grant: Grant{ActorID: "SYSTEM::x", SourceType: contract.SourceSystem, EventTypes: contract.AllTypes}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Environment: contract.EnvProd, Brokers: []string{"127.0.0.1:1"}, Keys: kr}); !errors.Is(err, ErrProdWithoutMTLS) {
		t.Fatalf("prod without mTLS: %v", err)
	}
	apiOnly := testKeyring(t)
	if _, err := New(Options{Environment: contract.EnvProd, Brokers: []string{"127.0.0.1:1"}, Keys: apiOnly, ClientCertAuth: true}); !errors.Is(err, ErrNoClientIdentities) {
		t.Fatalf("mTLS without client identities: %v", err)
	}
	// mTLS mode without a TLS config that verifies clients does not serve.
	gw, err := New(Options{Environment: contract.EnvProd, Brokers: []string{"127.0.0.1:1"}, Keys: kr, ClientCertAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := gw.Serve(context.Background(), ln, ServeOptions{TLS: &tls.Config{}}); !errors.Is(err, ErrTLSConfig) {
		t.Fatalf("Serve without client verification: %v", err)
	}
}

// In mTLS mode the verified client certificate is the identity: a mapped
// certificate's events carry its actor; an unmapped or revoked one is
// refused (and audited); no certificate fails the handshake; an API key
// does not stand in for a certificate.
func TestMTLSIdentity(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	_, srvCert, srvKey := ca.issue(t, "ingest", "", true)
	files := map[string][]byte{"server.pem": srvCert, "server.key": srvKey, "ca.pem": ca.pem}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tlsCfg, err := ServerTLSConfig(filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	scanner, _, _ := ca.issue(t, "scanner-eu1", "spiffe://driftline/maas-scanner", false)
	stranger, _, _ := ca.issue(t, "nobody", "", false)
	old, _, _ := ca.issue(t, "old-agent", "", false)
	otherCA := newTestCA(t)
	forged, _, _ := otherCA.issue(t, "scanner-eu1", "spiffe://driftline/maas-scanner", false)

	kr, err := NewKeyringWithClients(
		[]KeySpec{{SHA256: HashKey(fleetKey), Grant: Grant{ActorID: "SYSTEM::fleet", SourceType: contract.SourceSystem, EventTypes: contract.AllTypes}}},
		[]ClientSpec{
			{Identity: "uri:spiffe://driftline/maas-scanner", Grant: Grant{ActorID: "SYSTEM::maas-scanner", SourceType: contract.SourceSystem,
				EventTypes: []string{contract.TypeProviderObservation}}},
			// Less specific than the URI: must not win for the scanner.
			{Identity: "cn:scanner-eu1", Grant: Grant{ActorID: "HUMAN::wrong", SourceType: contract.SourceHuman, EventTypes: contract.AllTypes}},
			{Identity: "cn:old-agent", Grant: Grant{ActorID: "SYSTEM::old-agent", SourceType: contract.SourceSystem, EventTypes: contract.AllTypes, Revoked: true}},
		})
	if err != nil {
		t.Fatal(err)
	}
	s := newServed(t, func(o *Options) {
		o.Environment, o.Keys, o.ClientCertAuth = contract.EnvProd, kr, true
	}, ServeOptions{TLS: tlsCfg})

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	client := func(cert *tls.Certificate, key string) *Client {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		return &Client{URL: "https://" + s.addr, APIKey: key, HTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}}
	}
	line := enc(t, with(observation("obs-1", "node-1"), "environment", contract.EnvProd))
	post := func(c *Client) (Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.Post(ctx, [][]byte{line})
	}

	resp, err := post(client(&scanner, ""))
	if err != nil || resp.Accepted != 1 {
		t.Fatalf("mapped certificate: %v %+v", err, resp)
	}
	_, err = post(client(&scanner, ""))
	if err != nil {
		t.Fatalf("second request: %v", err)
	}
	for name, c := range map[string]*Client{
		"unmapped": client(&stranger, ""), "revoked": client(&old, ""), "unmapped with an API key": client(&stranger, fleetKey),
	} {
		_, err := post(c)
		var se *StatusError
		if !errors.As(err, &se) || se.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %v, want 401", name, err)
		}
	}
	for name, c := range map[string]*Client{"no certificate": client(nil, fleetKey), "other CA": client(&forged, "")} {
		var se *StatusError
		if _, err := post(c); err == nil || errors.As(err, &se) {
			t.Errorf("%s: %v, want a TLS handshake failure", name, err)
		}
	}

	// The record carries the certificate's actor, stamped by the gateway.
	e := &testEnv{t: t, cluster: s.cluster, names: s.names}
	r := e.read(s.names.Observations, 1)[0]
	if header(r, contract.HeaderActorID) != "SYSTEM::maas-scanner" || header(r, contract.HeaderSourceType) != contract.SourceSystem {
		t.Fatalf("headers %v", r.Headers)
	}
	refused := s.logs.auditLines(t, "auth_refused")
	kinds := map[string]int{}
	for _, a := range refused {
		kinds[a["kind"].(string)]++
		if a["kind"] == "revoked" && a["actor_id"] != "SYSTEM::old-agent" {
			t.Errorf("revoked audit names %v", a["actor_id"])
		}
	}
	if kinds["revoked"] != 1 || kinds["unknown"] != 2 {
		t.Fatalf("audit of refusals: %v", refused)
	}
}

func TestCertIdentitiesOrder(t *testing.T) {
	ca := newTestCA(t)
	pair, _, _ := ca.issue(t, "cn-name", "spiffe://x/y", false)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	ids := CertIdentities(leaf)
	if len(ids) != 3 || ids[1] != "uri:spiffe://x/y" || ids[2] != "cn:cn-name" || len(ids[0]) != len("sha256:")+64 {
		t.Fatalf("identities %v", ids)
	}
	kr, err := NewKeyringWithClients(nil, []ClientSpec{{Identity: ids[0], Grant: Grant{ActorID: "SYSTEM::pinned", SourceType: contract.SourceSystem, EventTypes: contract.AllTypes}},
		{Identity: "cn:cn-name", Grant: Grant{ActorID: "SYSTEM::by-name", SourceType: contract.SourceSystem, EventTypes: contract.AllTypes}}})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := kr.AuthenticateCert(leaf); err != nil || p.ActorID != "SYSTEM::pinned" {
		t.Fatalf("pinned fingerprint must win: %v %v", p, err)
	}
	for _, bad := range []string{"cn:", "email:a@b", "sha256:xyz", "nocolon"} {
		if _, err := NewKeyringWithClients(nil, []ClientSpec{{Identity: bad, Grant: Grant{ActorID: "SYSTEM::a", SourceType: contract.SourceSystem, EventTypes: contract.AllTypes}}}); err == nil {
			t.Errorf("identity %q accepted", bad)
		}
	}
}
