package testenv

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Server is a server under test that serves HTTP, such as the query API.
type Server interface {
	Handler() http.Handler
	Close()
}

// Serve serves srv's handler until the test ends, then closes the
// listener and srv, and returns the base URL.
func Serve(t testing.TB, srv Server) string {
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	return hs.URL
}

// GetJSON GETs u from a JSON API under test with LocalKey and returns the
// body. It fails t when the request fails, and reports an error when the
// status is not wantCode or the answer is not application/json.
func GetJSON(t testing.TB, u string, wantCode int) []byte {
	t.Helper()
	return GetJSONWithKey(t, u, LocalKey, wantCode)
}

// GetJSONWithKey is GetJSON with key (empty: no Authorization header).
func GetJSONWithKey(t testing.TB, u, key string, wantCode int) []byte {
	t.Helper()
	resp := Get(t, u, key)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != wantCode {
		t.Errorf("GET %s: %d, want %d: %s", u, resp.StatusCode, wantCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET %s: content type %q", u, ct)
	}
	return b
}
