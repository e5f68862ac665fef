package api_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
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

// certPair returns a certificate for cn signed by (caCert, caKey), or a
// self-signed CA when caCert is nil.
func certPair(t *testing.T, cn string, caCert *x509.Certificate, caKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	parent, signer := tmpl, key
	if caCert == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage, tmpl.ExtKeyUsage = true, true, x509.KeyUsageCertSign, nil
	} else {
		parent, signer = caCert, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}
}

// TestProdMTLS serves the API as prod does: every connection presents a
// client certificate the CA signed; the bearer key decides the roles, or,
// without one, the keys file's entry for the certificate.
func TestProdMTLS(t *testing.T) {
	caCert, caKey, _ := certPair(t, "driftline test CA", nil, nil)
	_, _, dash := certPair(t, "dashboard", caCert, caKey)
	_, _, other := certPair(t, "someone", caCert, caKey)
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
	pool.AddCert(caCert)
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
