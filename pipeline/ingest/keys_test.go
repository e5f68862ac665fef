package ingest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
	"github.com/driftline/driftline/pipeline/service"
)

func TestNewKeyringRejectsBadSpecs(t *testing.T) {
	good := keys.KeySpec{SHA256: keys.HashKey("k"), Grant: keys.Grant{ActorID: "SYSTEM::fleet", SourceType: contract.SourceSystem, EventTypes: []string{contract.TypeProviderObservation}}}
	for _, tc := range []struct {
		name string
		edit func(*keys.KeySpec)
		want string
	}{
		{"raw key instead of digest", func(s *keys.KeySpec) { s.SHA256 = "k" }, "64 hex digits"},
		{"actor without prefix", func(s *keys.KeySpec) { s.ActorID = "fleet" }, "SYSTEM::<name>"},
		{"actor with empty name", func(s *keys.KeySpec) { s.ActorID = "HUMAN::" }, "SYSTEM::<name>"},
		{"source type mismatch", func(s *keys.KeySpec) { s.SourceType = contract.SourceHuman }, "must match"},
		{"no event types", func(s *keys.KeySpec) { s.EventTypes = nil }, "event_types is empty"},
		{"unknown event type", func(s *keys.KeySpec) { s.EventTypes = []string{"x.y"} }, "unknown"},
		{"empty producer", func(s *keys.KeySpec) { s.Producers = []string{""} }, "empty name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.edit(&s)
			_, err := keys.NewKeyring([]keys.KeySpec{s})
			var kfe *keys.KeyFileError
			if !errors.As(err, &kfe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want keys.KeyFileError containing %q", err, tc.want)
			}
		})
	}
	if _, err := keys.NewKeyring([]keys.KeySpec{good, good}); err == nil {
		t.Fatal("duplicate digest accepted")
	}
}

func TestAuthenticate(t *testing.T) {
	kr, err := keys.ParseKeyring([]byte(`{"keys":[
		{"sha256":"` + keys.HashKey("live") + `","actor_id":"HUMAN::ops-1","source_type":"HUMAN","event_types":["platform.record"],"producers":["console"]},
		{"sha256":"` + strings.ToUpper(keys.HashKey("old")) + `","actor_id":"SYSTEM::old","source_type":"SYSTEM","event_types":["platform.record"],"revoked":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		want error
	}{{"", keys.ErrMissingKey}, {"nope", keys.ErrUnknownKey}, {"old", keys.ErrRevokedKey}, {"live", nil}} {
		p, err := kr.Authenticate(tc.key)
		if !errors.Is(err, tc.want) {
			t.Fatalf("Authenticate(%q) = %v, want %v", tc.key, err, tc.want)
		}
		if err == nil && (p.ActorID != "HUMAN::ops-1" || p.SourceType != contract.SourceHuman || !p.MayType(contract.TypePlatformRecord) ||
			p.MayType(contract.TypeUsageRecorded) || !p.MayProduce("console") || p.MayProduce("other")) {
			t.Fatalf("principal %+v has the wrong permissions", p)
		}
	}
}

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
