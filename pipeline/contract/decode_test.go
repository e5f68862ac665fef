package contract

import (
	"reflect"
	"strings"
	"testing"
)

const validObs = `{"event_id":"e1","event_type":"provider.observation","schema_version":1,"producer":"scanner","seq":7,
"occurred_at":"2026-11-21T10:15:30.123Z","correlation_id":"scan-1","environment":"local_parity",
"payload":{"provider":"maas","provider_id":"n1","resource_family":"gpuaas_allocation","observed_state":"running","observed_version":"v1","usage":"12.5"}}`

const noPayload = `{"event_id":"e1","event_type":"provider.observation","schema_version":1,"producer":"p",` +
	`"occurred_at":"2026-11-21T10:15:30Z","environment":"local_parity"`

func TestDecodeValid(t *testing.T) {
	env, payload, err := Validator{Environment: EnvLocalParity}.DecodeEvent([]byte(validObs))
	if err != nil {
		t.Fatal(err)
	}
	o, ok := payload.(*Observation)
	if !ok || o.ProviderID != "n1" || o.Usage != "12.5" {
		t.Fatalf("payload = %#v", payload)
	}
	if env.Seq != 7 || !env.HasSeq || env.Producer != "scanner" || env.OccurredAt.Nanosecond() != 123000000 {
		t.Fatalf("envelope = %+v", env)
	}
	if KeyOf(payload) != "maas/n1" {
		t.Fatalf("key = %q", KeyOf(payload))
	}
}

func TestDecodeReasons(t *testing.T) {
	set := func(old, new string) string {
		if !strings.Contains(validObs, old) {
			panic("fixture lacks " + old)
		}
		return strings.Replace(validObs, old, new, 1)
	}
	cases := []struct {
		name, line string
		reason     Reason
		field      string
	}{
		{"not json", `{"event_id":`, ReasonBadJSON, ""},
		{"array", `[1,2]`, ReasonBadJSON, ""},
		{"invalid utf8", set(`"scanner"`, "\"sc\xffanner\""), ReasonBadJSON, ""},
		{"oversized", set(`"scan-1"`, `"`+strings.Repeat("x", MaxEventLen)+`"`), ReasonOversized, ""},
		{"missing event_id", set(`"event_id":"e1",`, ``), ReasonMissingField, "event_id"},
		{"empty producer", set(`"producer":"scanner"`, `"producer":""`), ReasonMissingField, "producer"},
		{"missing payload", noPayload + `}`, ReasonMissingField, "payload"},
		{"seq wrong type", set(`"seq":7`, `"seq":"7"`), ReasonWrongType, "seq"},
		{"negative seq", set(`"seq":7`, `"seq":-7`), ReasonWrongType, "seq"},
		{"schema_version float", set(`"schema_version":1`, `"schema_version":1.5`), ReasonWrongType, "schema_version"},
		{"payload not object", noPayload + `,"payload":[1]}`, ReasonWrongType, "payload"},
		{"payload field type", set(`"usage":"12.5"`, `"usage":12.5`), ReasonWrongType, "payload.usage"},
		{"unknown type", set(`"provider.observation"`, `"provider.guess"`), ReasonUnknownEventType, "event_type"},
		{"unknown version", set(`"schema_version":1`, `"schema_version":2`), ReasonUnknownSchemaVersion, "schema_version"},
		{"bad time", set(`2026-11-21T10:15:30.123Z`, `yesterday`), ReasonInvalidField, "occurred_at"},
		{"long event id", set(`"e1"`, `"`+strings.Repeat("e", MaxIDLen+1)+`"`), ReasonInvalidField, "event_id"},
		{"unknown environment", set(`"environment":"local_parity"`, `"environment":"staging"`), ReasonInvalidField, "environment"},
		{"wrong environment", set(`"environment":"local_parity"`, `"environment":"prod"`), ReasonWrongEnvironment, "environment"},
		{"missing payload field", set(`"provider_id":"n1",`, ``), ReasonMissingField, "payload.provider_id"},
		{"bad enum", set(`"resource_family":"gpuaas_allocation"`, `"resource_family":"gpu"`), ReasonInvalidField, "payload.resource_family"},
		{"float money", set(`"usage":"12.5"`, `"usage":"1e3"`), ReasonInvalidField, "payload.usage"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Validator{Environment: EnvLocalParity}.DecodeEvent([]byte(c.line))
			if err == nil {
				t.Fatalf("accepted %s", c.line)
			}
			if err.Reason != c.reason || (c.field != "" && err.Field != c.field) {
				t.Fatalf("got %v (field %q), want reason %s field %q", err, err.Field, c.reason, c.field)
			}
		})
	}
}

func TestIsDecimal(t *testing.T) {
	for s, want := range map[string]bool{"0": true, "12.500000": true, "-3.1": true, "": false, ".5": false,
		"5.": false, "+1": false, "1e3": false, "NaN": false, "1.2.3": false, "--1": false,
		"1.0000000000000000001": false, "9223372036854775808": false, "9223372036854775807": true} {
		if IsDecimal(s) != want {
			t.Errorf("IsDecimal(%q) = %v", s, !want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(validObs))
	f.Add([]byte(`{"payload":{"a":{"b":{"c":[[[[]]]]}}}}`))
	f.Add([]byte(`{"event_id":"a","event_id":"b"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		env, payload, err := Validator{Environment: EnvLocalParity}.DecodeEvent(line)
		zenv, zpayload, zerr := Validator{Environment: EnvLocalParity, ZeroCopy: true}.DecodeEvent(line)
		if !reflect.DeepEqual(env, zenv) || !reflect.DeepEqual(payload, zpayload) || !reflect.DeepEqual(err, zerr) {
			t.Fatalf("ZeroCopy disagrees: %+v %v / %+v %v", env, err, zenv, zerr)
		}
		if err != nil {
			if err.Reason == "" {
				t.Fatalf("rejection without reason: %v", err)
			}
			return
		}
		if env.EventID == "" || env.Producer == "" || payload == nil || TopicOf(env.EventType) == "" {
			t.Fatalf("accepted an incomplete event: %+v", env)
		}
		_ = KeyOf(payload)
	})
}
