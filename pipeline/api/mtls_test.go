package api_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/access"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
)

// TestProdMTLS serves the API as prod does: every connection presents a
// client certificate the CA signed; the bearer key decides the roles, or,
// without one, the keys file's entry for the certificate.
func TestProdMTLS(t *testing.T) {
	ca := testenv.NewCA(t)
	dash, _, _ := ca.Issue(t, "dashboard", "", false)
	other, _, _ := ca.Issue(t, "someone", "", false)
	kr, err := keys.NewKeyringWithClients(
		[]keys.KeySpec{spec(keyViewer, "HUMAN::vera", keys.Grant{Roles: []string{contract.RoleViewer}})},
		[]keys.ClientSpec{{Identity: "cn:dashboard", Grant: keys.Grant{ActorID: "SYSTEM::dashboard", SourceType: contract.SourceSystem, Roles: []string{contract.RoleViewer}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := access.NewGuard(access.GuardOptions{Environment: contract.EnvProd, LocalKey: testenv.LocalKey}, kr); err == nil {
		t.Fatal("a prod guard without mTLS")
	}
	guard, err := access.NewGuard(access.GuardOptions{Environment: contract.EnvProd, LocalKey: testenv.LocalKey, MTLS: true}, kr)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Guard: guard, DB: openDB(t), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	hs := httptest.NewUnstartedServer(srv.Handler())
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	hs.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	hs.StartTLS()
	t.Cleanup(hs.Close)

	get := func(cert *tls.Certificate, key string) (int, error) {
		tr := hs.Client().Transport.(*http.Transport).Clone()
		if cert != nil {
			tr.TLSClientConfig.Certificates = []tls.Certificate{*cert}
		}
		req, _ := http.NewRequest(http.MethodGet, hs.URL+"/v1/drift", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if _, err := get(nil, keyViewer); err == nil {
		t.Error("a connection without a client certificate was served")
	}
	for _, tc := range []struct {
		name string
		cert *tls.Certificate
		key  string
		want int
	}{
		{"certificate and viewer key", &other, keyViewer, 200},
		{"mapped certificate, no key", &dash, "", 200},
		{"unmapped certificate, no key", &other, "", 401},
		{"certificate and the local key", &dash, testenv.LocalKey, 401},
	} {
		if code, err := get(tc.cert, tc.key); err != nil || code != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.name, code, err, tc.want)
		}
	}
}
