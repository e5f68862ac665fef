package keys

import (
	"testing"
	"unicode/utf8"

	json "github.com/segmentio/encoding/json"
)

// FuzzParseKeyring feeds arbitrary keys files to ParseKeyring: no panic;
// a file it accepts lists each entry once, and the keyring written back
// as a keys file parses to the same entries (what a reload of an
// unchanged policy does).
func FuzzParseKeyring(f *testing.F) {
	f.Add([]byte(`{"keys":[
		{"sha256":"` + HashKey("live") + `","actor_id":"HUMAN::ops-1","source_type":"HUMAN","event_types":["platform.record"],"producers":["console"]},
		{"sha256":"` + HashKey("old") + `","actor_id":"SYSTEM::old","source_type":"SYSTEM","event_types":["platform.record","usage.recorded"],"revoked":true}],
	 "clients":[
		{"identity":"uri:spiffe://driftline/maas-scanner","actor_id":"SYSTEM::maas-scanner","source_type":"SYSTEM","event_types":["provider.observation"]},
		{"identity":"sha256:` + HashKey("cert") + `","actor_id":"SYSTEM::x","source_type":"SYSTEM","event_types":["provider.observation"],"revoked":true}]}`))
	f.Add([]byte(`{"keys":[]}`))
	f.Add([]byte(`{"keys":[{"sha256":"` + HashKey("k") + `","actor_id":"SYSTEM::a","source_type":"HUMAN","event_types":["platform.record"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		kr, err := ParseKeyring(data)
		if err != nil {
			return
		}
		if kr.Len() != len(kr.Specs())+len(kr.ClientSpecs()) || kr.Clients() != len(kr.ClientSpecs()) {
			t.Fatalf("Len %d, Clients %d of %d keys and %d clients", kr.Len(), kr.Clients(), len(kr.Specs()), len(kr.ClientSpecs()))
		}
		if !utf8.Valid(data) {
			return // JSON encoding replaces invalid UTF-8, so the round trip may differ
		}
		again, err := json.Marshal(KeyFile{Keys: kr.Specs(), Clients: kr.ClientSpecs()})
		if err != nil {
			t.Fatal(err)
		}
		kr2, err := ParseKeyring(again)
		if err != nil {
			t.Fatalf("the keyring written back does not parse: %v\n%s", err, again)
		}
		// Compared as written: an empty list and none are the same file.
		if twice, err := json.Marshal(KeyFile{Keys: kr2.Specs(), Clients: kr2.ClientSpecs()}); err != nil || string(twice) != string(again) {
			t.Fatalf("written back and parsed again:\n%s\nwant\n%s", twice, again)
		}
	})
}
