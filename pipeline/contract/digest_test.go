package contract

import (
	"strings"
	"testing"
)

func digestOf(t testing.TB, line string) Digest {
	t.Helper()
	env, _, err := Validator{Environment: EnvLocalParity}.DecodeEvent([]byte(line))
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return EventDigest(&env)
}

const digestBase = `{"event_id":"e1","event_type":"provider.observation","schema_version":1,"producer":"scanner","seq":7,` +
	`"occurred_at":"2026-11-21T10:15:30.123Z","correlation_id":"scan-1","environment":"local_parity",` +
	`"payload":{"provider":"maas","provider_id":"n-1","resource_family":"gpuaas_allocation","observed_state":"running","observed_version":"v1"}}`

func TestDigestSameContent(t *testing.T) {
	base := digestOf(t, digestBase)
	same := map[string]string{
		"another event_id":  strings.Replace(digestBase, `"event_id":"e1"`, `"event_id":"e2"`, 1),
		"another seq":       strings.Replace(digestBase, `"seq":7`, `"seq":8`, 1),
		"another producer":  strings.Replace(digestBase, `"producer":"scanner"`, `"producer":"other"`, 1),
		"envelope order":    `{"payload":{"provider":"maas","provider_id":"n-1","resource_family":"gpuaas_allocation","observed_state":"running","observed_version":"v1"},"environment":"local_parity","correlation_id":"scan-1","occurred_at":"2026-11-21T10:15:30.123Z","seq":7,"producer":"scanner","schema_version":1,"event_type":"provider.observation","event_id":"e1"}`,
		"payload key order": strings.Replace(digestBase, `{"provider":"maas","provider_id":"n-1"`, `{"provider_id":"n-1","provider":"maas"`, 1),
		"whitespace":        strings.Replace(digestBase, `{"provider":"maas","provider_id":"n-1"`, "{ \"provider\" :\t\"maas\" ,\n \"provider_id\": \"n-1\"", 1),
		"escapes":           strings.Replace(digestBase, `"provider_id":"n-1"`, `"provider_id":"\u006e-1"`, 1),
		"time zone":         strings.Replace(digestBase, `2026-11-21T10:15:30.123Z`, `2026-11-21T12:15:30.123+02:00`, 1),
		"trailing zeros":    strings.Replace(digestBase, `2026-11-21T10:15:30.123Z`, `2026-11-21T10:15:30.123000Z`, 1),
	}
	for name, line := range same {
		if d := digestOf(t, line); d != base {
			t.Errorf("%s: digest %s, want %s", name, d, base)
		}
	}
}

func TestDigestOtherContent(t *testing.T) {
	seen := map[Digest]string{digestOf(t, digestBase): "base"}
	other := map[string]string{
		"payload value":     strings.Replace(digestBase, `"provider_id":"n-1"`, `"provider_id":"n-2"`, 1),
		"payload field":     strings.Replace(digestBase, `"observed_version":"v1"}`, `"observed_version":"v1","owner_ref":"r-1"}`, 1),
		"value in key":      strings.Replace(digestBase, `"observed_state":"running","observed_version":"v1"`, `"observed_state":"v1","observed_version":"running"`, 1),
		"occurred_at":       strings.Replace(digestBase, `10:15:30.123Z`, `10:15:30.124Z`, 1),
		"correlation_id":    strings.Replace(digestBase, `"correlation_id":"scan-1"`, `"correlation_id":"scan-2"`, 1),
		"no correlation_id": strings.Replace(digestBase, `"correlation_id":"scan-1",`, ``, 1),
		"event_type":        strings.Replace(strings.Replace(digestBase, `provider.observation`, `provider.scan_completed`, 1), `{"provider":"maas","provider_id":"n-1","resource_family":"gpuaas_allocation","observed_state":"running","observed_version":"v1"}`, `{"provider":"maas","scan_id":"s","scan_started_at":"2026-11-21T10:00:00Z"}`, 1),
	}
	for name, line := range other {
		d := digestOf(t, line)
		if prev, ok := seen[d]; ok {
			t.Errorf("%s: digest %s, the same as %s", name, d, prev)
		}
		seen[d] = name
	}
}

func TestPayloadDigestCanonical(t *testing.T) {
	same := [][2]string{
		{`{"a":1,"b":[1,2,{"c":"x","d":null}]}`, ` { "b" : [ 1 , 2 , { "d" : null , "c" : "x" } ] , "a" : 1 } `},
		{`{"s":"\"é\n\ud83d\ude00/"}`, `{"s":"\u0022\u00e9\u000a😀\/"}`},
		{`{}`, `{ }`},
		{`{"long-key-name-x":"abcdefghijklmnopq\"rstuvwxyz0123456789"}`, `{"long-key-name-x":"abcdefghijklmnopq\u0022rstuvwxyz0123456789"}`},
		{`[]`, ` [ ] `},
	}
	for _, c := range same {
		if a, b := PayloadDigest([]byte(c[0])), PayloadDigest([]byte(c[1])); a != b {
			t.Errorf("%s and %s: %s != %s", c[0], c[1], a, b)
		}
	}
	differ := []string{
		`{"a":1}`, `{"a":"1"}`, `{"a":1.0}`, `{"a":[1,2]}`, `{"a":[2,1]}`, `{"a":[[1],2]}`, `{"a":[1,[2]]}`,
		`{"a":{}}`, `{"a":[]}`, `{"a":null}`, `{"a":true}`, `{"a":false}`, `{"b":1}`, `{"a":1,"b":1}`,
		`{"ab":"c"}`, `{"a":"bc"}`, `{"a":"0123456789abcdefX"}`, `{"a":"0123456789abcdefY"}`, `{"a":"X0123456789abcdef0123456789abcd"}`,
		`{"a":"Y0123456789abcdef0123456789abcd"}`, `{"a":"0123456789abcdef0123456789abcdefZ"}`, `{"a":{"b":1},"c":2}`, `{"a":{"b":1,"c":2}}`, `{"a":""}`, `{}`, `[]`, `""`,
	}
	seen := map[Digest]string{}
	for _, p := range differ {
		d := PayloadDigest([]byte(p))
		if prev, ok := seen[d]; ok {
			t.Errorf("%s and %s share digest %s", p, prev, d)
		}
		seen[d] = p
	}
}

func TestDigestString(t *testing.T) {
	if got := Digest(0x00ab).String(); got != "00000000000000ab" {
		t.Fatalf("got %q", got)
	}
}

// FuzzPayloadDigest checks that the digest of any input (valid or not)
// returns without panicking, and that a valid event's digest does not
// depend on its key order.
func FuzzPayloadDigest(f *testing.F) {
	f.Add([]byte(`{"a":"\u00e9","b":[1,{"c":null}]}`))
	f.Add([]byte(`{"a":"\`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = PayloadDigest(b)
	})
}

// BenchmarkDigest measures the digest of a typical event, which the
// gateway and every consumer compute once per event.
func BenchmarkDigest(b *testing.B) {
	for _, typ := range AllTypes {
		line := sampleEvent(typ, 0)
		env, _, err := Validator{Environment: EnvLocalParity}.DecodeEvent(line)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(typ, func(b *testing.B) {
			measure(b, env.Payload, func() {
				for b.Loop() {
					_ = EventDigest(&env)
				}
			})
		})
	}
}
