package keys

import (
	"errors"
	"strings"
	"testing"

	"github.com/driftline/driftline/pipeline/contract"
)

func TestNewKeyringRejectsBadSpecs(t *testing.T) {
	good := KeySpec{SHA256: HashKey("k"), Grant: Grant{ActorID: "SYSTEM::fleet", SourceType: contract.SourceSystem, EventTypes: []string{contract.TypeProviderObservation}}}
	for _, tc := range []struct {
		name string
		edit func(*KeySpec)
		want string
	}{
		{"raw key instead of digest", func(s *KeySpec) { s.SHA256 = "k" }, "64 hex digits"},
		{"actor without prefix", func(s *KeySpec) { s.ActorID = "fleet" }, "SYSTEM::<name>"},
		{"actor with empty name", func(s *KeySpec) { s.ActorID = "HUMAN::" }, "SYSTEM::<name>"},
		{"source type mismatch", func(s *KeySpec) { s.SourceType = contract.SourceHuman }, "must match"},
		{"no event types", func(s *KeySpec) { s.EventTypes = nil }, "event_types is empty"},
		{"unknown event type", func(s *KeySpec) { s.EventTypes = []string{"x.y"} }, "unknown"},
		{"empty producer", func(s *KeySpec) { s.Producers = []string{""} }, "empty name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.edit(&s)
			_, err := NewKeyring([]KeySpec{s})
			var kfe *KeyFileError
			if !errors.As(err, &kfe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want KeyFileError containing %q", err, tc.want)
			}
		})
	}
	if _, err := NewKeyring([]KeySpec{good, good}); err == nil {
		t.Fatal("duplicate digest accepted")
	}
}

func TestAuthenticate(t *testing.T) {
	kr, err := ParseKeyring([]byte(`{"keys":[
		{"sha256":"` + HashKey("live") + `","actor_id":"HUMAN::ops-1","source_type":"HUMAN","event_types":["platform.record"],"producers":["console"]},
		{"sha256":"` + strings.ToUpper(HashKey("old")) + `","actor_id":"SYSTEM::old","source_type":"SYSTEM","event_types":["platform.record"],"revoked":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		want error
	}{{"", ErrMissingKey}, {"nope", ErrUnknownKey}, {"old", ErrRevokedKey}, {"live", nil}} {
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
