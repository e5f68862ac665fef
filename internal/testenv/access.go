package testenv

import (
	"net/http"
	"testing"

	"github.com/driftline/driftline/pipeline/api/access"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
	"github.com/driftline/driftline/pipeline/service"
)

// LocalKey is the key tests call the query API with: the local_parity
// key, admin under LocalGuard.
const LocalKey = service.DefaultLocalAPIKey

// LocalGuard returns the query API's access guard of local_parity without
// a keys file: LocalKey is admin.
func LocalGuard(t testing.TB) *access.Guard {
	t.Helper()
	g, err := access.NewGuard(access.GuardOptions{Environment: contract.EnvLocalParity, LocalKey: LocalKey},
		keys.LocalKeyring(LocalKey))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Get GETs u with key (empty: no Authorization header) and the given
// headers (name, value pairs), failing t when the request fails.
func Get(t testing.TB, u, key string, header ...string) *http.Response {
	t.Helper()
	resp, err := Do(u, key, header...)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Do GETs u with key (empty: no Authorization header) and the given
// headers (name, value pairs).
func Do(u, key string, header ...string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return http.DefaultClient.Do(req)
}
