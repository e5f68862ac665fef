package ingest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
	"github.com/driftline/driftline/pipeline/service"
)

func TestProdRequiresMTLS(t *testing.T) {
	kr, err := keys.NewKeyringWithClients(nil, []keys.ClientSpec{{Identity: "cn:x", Grant: keys.Grant{ActorID: "SYSTEM::x", SourceType: contract.SourceSystem, EventTypes: contract.AllTypes}}})
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
	ca := testenv.NewCA(t)
	dir := t.TempDir()
	_, srvCert, srvKey := ca.Issue(t, "ingest", "", true)
	files := map[string][]byte{"server.pem": srvCert, "server.key": srvKey, "ca.pem": ca.PEM}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tlsCfg, err := service.ServerTLSConfig(filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	scanner, _, _ := ca.Issue(t, "scanner-eu1", "spiffe://driftline/maas-scanner", false)
	stranger, _, _ := ca.Issue(t, "nobody", "", false)
	old, _, _ := ca.Issue(t, "old-agent", "", false)
	otherCA := testenv.NewCA(t)
	forged, _, _ := otherCA.Issue(t, "scanner-eu1", "spiffe://driftline/maas-scanner", false)

	kr, err := keys.NewKeyringWithClients(
		[]keys.KeySpec{{SHA256: keys.HashKey(fleetKey), Grant: keys.Grant{ActorID: "SYSTEM::fleet", SourceType: contract.SourceSystem, EventTypes: contract.AllTypes}}},
		[]keys.ClientSpec{
			{Identity: "uri:spiffe://driftline/maas-scanner", Grant: keys.Grant{ActorID: "SYSTEM::maas-scanner", SourceType: contract.SourceSystem,
				EventTypes: []string{contract.TypeProviderObservation}}},
			// Less specific than the URI: must not win for the scanner.
			{Identity: "cn:scanner-eu1", Grant: keys.Grant{ActorID: "HUMAN::wrong", SourceType: contract.SourceHuman, EventTypes: contract.AllTypes}},
			{Identity: "cn:old-agent", Grant: keys.Grant{ActorID: "SYSTEM::old-agent", SourceType: contract.SourceSystem, EventTypes: contract.AllTypes, Revoked: true}},
		})
	if err != nil {
		t.Fatal(err)
	}
	s := newServed(t, func(o *Options) {
		o.Environment, o.Keys, o.ClientCertAuth = contract.EnvProd, kr, true
	}, ServeOptions{TLS: tlsCfg})

	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
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
	ca := testenv.NewCA(t)
	pair, _, _ := ca.Issue(t, "cn-name", "spiffe://x/y", false)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	ids := keys.CertIdentities(leaf)
	if len(ids) != 3 || ids[1] != "uri:spiffe://x/y" || ids[2] != "cn:cn-name" || len(ids[0]) != len("sha256:")+64 {
		t.Fatalf("identities %v", ids)
	}
	kr, err := keys.NewKeyringWithClients(nil, []keys.ClientSpec{{Identity: ids[0], Grant: keys.Grant{ActorID: "SYSTEM::pinned", SourceType: contract.SourceSystem, EventTypes: contract.AllTypes}},
		{Identity: "cn:cn-name", Grant: keys.Grant{ActorID: "SYSTEM::by-name", SourceType: contract.SourceSystem, EventTypes: contract.AllTypes}}})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := kr.AuthenticateCert(leaf); err != nil || p.ActorID != "SYSTEM::pinned" {
		t.Fatalf("pinned fingerprint must win: %v %v", p, err)
	}
	for _, bad := range []string{"cn:", "email:a@b", "sha256:xyz", "nocolon"} {
		if _, err := keys.NewKeyringWithClients(nil, []keys.ClientSpec{{Identity: bad, Grant: keys.Grant{ActorID: "SYSTEM::a", SourceType: contract.SourceSystem, EventTypes: contract.AllTypes}}}); err == nil {
			t.Errorf("identity %q accepted", bad)
		}
	}
}
