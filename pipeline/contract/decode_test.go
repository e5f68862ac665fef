package contract

import (
	stdjson "encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
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

// The fleet core's fields (CONTRACT 8.1, 8.2): every unknown enum value is
// invalid_field naming the field, nested fields by their path; the
// registry events' required fields and digest form are checked.
func TestDecodeFleetReasons(t *testing.T) {
	edit := func(typ string, i int, old, new string) string {
		line := string(sampleEvent(typ, i))
		if !strings.Contains(line, old) {
			t.Fatalf("sample %s %d lacks %s: %s", typ, i, old, line)
		}
		return strings.Replace(line, old, new, 1)
	}
	cases := []struct {
		name, line string
		reason     Reason
		field      string
	}{
		{"node kind", edit(TypePlatformRecord, 1, `"node_kind":"EDGE"`, `"node_kind":"edge"`), ReasonInvalidField, "payload.node_kind"},
		{"lifecycle intent", edit(TypePlatformRecord, 1, `"lifecycle_intent":"ACTIVE"`, `"lifecycle_intent":"LIVE"`), ReasonInvalidField, "payload.lifecycle_intent"},
		{"master of record", edit(TypePlatformRecord, 1, `"master_of_record":"REGION"`, `"master_of_record":"PLANET"`), ReasonInvalidField, "payload.authority.master_of_record"},
		{"empty controller id", edit(TypePlatformRecord, 2, `"controller_ids":["ctl-a"`, `"controller_ids":[""`), ReasonInvalidField, "payload.authority.controller_ids"},
		{"authority not an object", edit(TypePlatformRecord, 1, `"authority":{"master_of_record":"REGION"}`, `"authority":"REGION"`), ReasonWrongType, ""},
		{"requires_online not a bool", edit(TypePlatformRecord, 1, `"requires_online":true`, `"requires_online":"yes"`), ReasonWrongType, ""},
		{"negative uptime", edit(TypeHeartbeat, 1, `"uptime_s":60`, `"uptime_s":-60`), ReasonInvalidField, "payload.uptime_s"},
		{"artifact without digest", edit(TypeArtifact, 1, `"digest":"`+sampleDigest+`",`, ``), ReasonMissingField, "payload.digest"},
		{"artifact digest form", edit(TypeArtifact, 1, sampleDigest, "md5:0123"), ReasonInvalidField, "payload.digest"},
		{"artifact digest short", edit(TypeArtifact, 1, sampleDigest, sampleDigest[:len(sampleDigest)-1]), ReasonInvalidField, "payload.digest"},
		{"artifact digest not hex", edit(TypeArtifact, 1, sampleDigest, sampleDigest[:len(sampleDigest)-1]+"g"), ReasonInvalidField, "payload.digest"},
		{"artifact without version", edit(TypeArtifact, 1, `"version":"2.0",`, ``), ReasonMissingField, "payload.version"},
		{"bundle without deadline", edit(TypePolicyBundle, 1, `,"deadline":"2026-11-21T12:15:30.000001+02:00"`, ``), ReasonInvalidField, "payload.deadline"},
		{"bundle without artifact", edit(TypePolicyBundle, 1, `"artifact_id":"art-1",`, ``), ReasonMissingField, "payload.artifact_id"},
		{"bundle without target", edit(TypePolicyBundle, 1, `"target_version":"2.0",`, ``), ReasonMissingField, "payload.target_version"},
		{"bundle bad deadline", edit(TypePolicyBundle, 1, `"deadline":"2026-11-21T12:15:30.000001+02:00"`, `"deadline":"tomorrow"`), ReasonWrongType, "payload.deadline"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sameAsReference(t, []byte(c.line))
			_, _, err := Validator{Environment: EnvLocalParity}.DecodeEvent([]byte(c.line))
			if err == nil {
				t.Fatalf("accepted %s", c.line)
			}
			if err.Reason != c.reason || (c.field != "" && err.Field != c.field) {
				t.Fatalf("got %v (field %q), want reason %s field %q", err, err.Field, c.reason, c.field)
			}
		})
	}
	// Every value of each list is accepted.
	for _, k := range NodeKinds {
		line := edit(TypePlatformRecord, 1, `"node_kind":"EDGE"`, `"node_kind":"`+string(k)+`"`)
		if _, _, err := (Validator{}).DecodeEvent([]byte(line)); err != nil {
			t.Errorf("node kind %s: %v", k, err)
		}
	}
	for _, in := range LifecycleIntents {
		line := edit(TypePlatformRecord, 1, `"lifecycle_intent":"ACTIVE"`, `"lifecycle_intent":"`+string(in)+`"`)
		if _, _, err := (Validator{}).DecodeEvent([]byte(line)); err != nil {
			t.Errorf("intent %s: %v", in, err)
		}
	}
	for _, m := range MastersOfRecord {
		line := edit(TypePlatformRecord, 1, `"master_of_record":"REGION"`, `"master_of_record":"`+string(m)+`"`)
		if _, _, err := (Validator{}).DecodeEvent([]byte(line)); err != nil {
			t.Errorf("master %s: %v", m, err)
		}
	}
}

// The registry's events go to platform.records and are keyed by their
// own id.
func TestFleetEventTopicsAndKeys(t *testing.T) {
	for typ, key := range map[string]string{TypeArtifact: "artifact/art-1", TypePolicyBundle: "bundle/pb-1"} {
		if TopicOf(typ) != TopicPlatformRecords {
			t.Errorf("topic of %s = %q", typ, TopicOf(typ))
		}
		_, p, err := Validator{}.DecodeEvent(sampleEvent(typ, 1))
		if err != nil {
			t.Fatal(err)
		}
		if KeyOf(p) != key {
			t.Errorf("key of %s = %q, want %q", typ, KeyOf(p), key)
		}
	}
}

// TestTimesInRange: every time an event carries must lie within MinTime
// and MaxTime, the Unix nanoseconds of an int64, which the pipeline keeps
// times in; outside them a time would wrap around into another (1442-05-10
// is 2026-11-28 modulo 2^64 ns). Both bounds are times an event may carry.
func TestTimesInRange(t *testing.T) {
	before, after := MinTime.Add(-time.Nanosecond), MaxTime.Add(time.Nanosecond)
	wrapped := time.Date(1442, 5, 10, 6, 25, 26, 290448384, time.UTC)
	event := func(typ, occurredAt string, payload any) []byte {
		b, err := stdjson.Marshal(wireEnvelope{EventID: "e-1", EventType: typ, SchemaVersion: 1, Producer: "producer-1",
			OccurredAt: occurredAt, Environment: EnvLocalParity, Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	occurred := func(at time.Time) []byte {
		return event(TypeProviderObservation, at.Format(time.RFC3339Nano), samplePayload(TypeProviderObservation, 0))
	}
	at := func(typ string, set func(p any)) []byte {
		p := samplePayload(typ, 0)
		set(p)
		return event(typ, "2026-11-21T10:15:30Z", p)
	}
	cases := []struct {
		name  string
		line  []byte
		field string // "": valid
	}{
		{"occurred_at at the lower bound", occurred(MinTime), ""},
		{"occurred_at at the upper bound", occurred(MaxTime), ""},
		{"occurred_at before", occurred(before), "occurred_at"},
		{"occurred_at that wraps to 2026", occurred(wrapped), "occurred_at"},
		{"occurred_at after", occurred(after), "occurred_at"},
		{"occurred_at in 9999", occurred(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)), "occurred_at"},
		{"scan_started_at", at(TypeScanCompleted, func(p any) { p.(*ScanCompleted).ScanStartedAt = wrapped }), "payload.scan_started_at"},
		{"window_start", at(TypeUsageRecorded, func(p any) { p.(*Usage).WindowStart = before }), "payload.window_start"},
		{"window_end", at(TypeUsageRecorded, func(p any) { p.(*Usage).WindowEnd = after }), "payload.window_end"},
		{"rated_at", at(TypeBillingRated, func(p any) { p.(*Rated).RatedAt = after }), "payload.rated_at"},
		{"posted_at", at(TypeLedgerEntry, func(p any) { p.(*LedgerEntry).PostedAt = before }), "payload.posted_at"},
		{"deadline", at(TypePolicyBundle, func(p any) { p.(*PolicyBundle).Deadline = after }), "payload.deadline"},
		{"until", at(TypeCommand, func(p any) { p.(*Command).Until = wrapped }), "payload.until"},
		{"until unset", at(TypeCommand, func(p any) { p.(*Command).Until = time.Time{} }), ""},
	}
	for _, c := range cases {
		for _, zeroCopy := range []bool{false, true} {
			_, _, err := Validator{Environment: EnvLocalParity, ZeroCopy: zeroCopy}.DecodeEvent(c.line)
			switch {
			case c.field == "" && err != nil:
				t.Errorf("%s (zero copy %v): %v", c.name, zeroCopy, err)
			case c.field != "" && (err == nil || err.Reason != ReasonInvalidField || err.Field != c.field):
				t.Errorf("%s (zero copy %v): %v, want invalid_field on %s", c.name, zeroCopy, err, c.field)
			}
		}
	}
}

// TestUnitVersionFitsUInt32: a rated line's unit_version is one the read
// model's UInt32 column holds (as the price book's versions are).
func TestUnitVersionFitsUInt32(t *testing.T) {
	for v, ok := range map[int64]bool{0: false, 1: true, math.MaxUint32: true, math.MaxUint32 + 1: false, math.MaxInt64: false} {
		p := samplePayload(TypeBillingRated, 0)
		p.(*Rated).UnitVersion = v
		line, err := stdjson.Marshal(wireEnvelope{EventID: "e-1", EventType: TypeBillingRated, SchemaVersion: 1, Producer: "rater",
			OccurredAt: "2026-11-21T10:15:30Z", Environment: EnvLocalParity, Payload: p})
		if err != nil {
			t.Fatal(err)
		}
		for _, zeroCopy := range []bool{false, true} {
			_, _, verr := Validator{Environment: EnvLocalParity, ZeroCopy: zeroCopy}.DecodeEvent(line)
			if ok != (verr == nil) || !ok && verr.Field != "payload.unit_version" {
				t.Errorf("unit_version %d (zero copy %v): %v", v, zeroCopy, verr)
			}
		}
	}
}
