package ingest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
	"github.com/driftline/driftline/pipeline/service"
)

func TestOpenKeyring(t *testing.T) {
	kr, err := keys.OpenKeyring(contract.EnvLocalParity, "", service.DefaultLocalAPIKey)
	if err != nil || !kr.Builtin() {
		t.Fatalf("local_parity without keys file: %v builtin=%v", err, kr != nil && kr.Builtin())
	}
	p, err := kr.Authenticate(service.DefaultLocalAPIKey)
	if err != nil || p.ActorID != keys.LocalActorID {
		t.Fatalf("local key: %v", err)
	}
	for _, env := range []string{contract.EnvDev, contract.EnvProd} {
		if _, err := keys.OpenKeyring(env, "", service.DefaultLocalAPIKey); !errors.Is(err, keys.ErrNoKeysFile) {
			t.Fatalf("%s without keys file: %v, want keys.ErrNoKeysFile", env, err)
		}
	}
	path := filepath.Join(t.TempDir(), "keys.json")
	doc := `{"keys":[{"sha256":"` + keys.HashKey(service.DefaultLocalAPIKey) + `","actor_id":"SYSTEM::x","source_type":"SYSTEM","event_types":["platform.record"]}]}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	kr, err = keys.OpenKeyring(contract.EnvProd, path, service.DefaultLocalAPIKey)
	if err != nil || kr.Builtin() {
		t.Fatalf("keys file: %v", err)
	}
	// ... but a dev gateway refuses an allowlist admitting the local key.
	_, err = New(Options{Environment: contract.EnvDev, Brokers: []string{"127.0.0.1:1"}, Keys: kr})
	if !errors.Is(err, keys.ErrLocalKeyOutsideLocal) {
		t.Fatalf("New(dev, local key) = %v, want keys.ErrLocalKeyOutsideLocal", err)
	}
}
