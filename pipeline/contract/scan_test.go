package contract

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestScanRules(t *testing.T) {
	deep := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	deepArr := func(n int) string { return `{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + "}" }
	many := func(n int, dupAt int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			k := i
			if i == dupAt {
				k = 0
			}
			b.WriteString(`"k` + strings.Repeat("x", k) + `":1`)
		}
		b.WriteString("}")
		return b.String()
	}
	for _, tc := range []struct {
		name, in string
		want     Reason // "" = accepted
	}{
		{"empty object", `{}`, ""},
		{"spaces", " \t\r\n{ \"a\" : [ 1 , -0.5e+3 , true , false , null , \"\\u00e9\\n\" ] } \n", ""},
		{"max depth", deep(MaxDepth), ""},
		{"max depth array", deepArr(MaxDepth), ""},
		{"too deep", deep(MaxDepth + 1), ReasonTooDeep},
		{"too deep array", deepArr(MaxDepth + 1), ReasonTooDeep},
		{"very deep", strings.Repeat("[", 1<<20), ReasonBadJSON}, // not an object at all
		{"very deep object", `{"a":` + strings.Repeat("[", 1<<20), ReasonTooDeep},
		{"duplicate top", `{"a":1,"b":2,"a":3}`, ReasonDuplicateKey},
		{"duplicate nested", `{"p":{"x":1,"x":1}}`, ReasonDuplicateKey},
		{"duplicate escaped", `{"p":{"ab":1,"a\u0062":2}}`, ReasonDuplicateKey},
		{"duplicate escaped both", `{"\/":1,"\u002f":2}`, ReasonDuplicateKey},
		{"same key in siblings", `{"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":2}]}`, ""},
		{"same key at two depths", `{"x":{"x":{"x":1}}}`, ""},
		{"case differs", `{"a":1,"A":2}`, ""},
		{"many keys", many(200, -1), ""},
		{"many keys duplicate late", many(200, 150), ReasonDuplicateKey},
		{"many keys duplicate early", many(200, 3), ReasonDuplicateKey},
		{"invalid utf8 in value", "{\"a\":\"\xff\"}", ReasonBadJSON},
		{"invalid utf8 in key", "{\"\xc3\x28\":1}", ReasonBadJSON},
		{"surrogate bytes", "{\"a\":\"\xed\xa0\x80\"}", ReasonBadJSON},
		{"overlong", "{\"a\":\"\xc0\xaf\"}", ReasonBadJSON},
		{"control char", "{\"a\":\"x\ty\"}", ReasonBadJSON},
		{"bad escape", `{"a":"\x"}`, ReasonBadJSON},
		{"short unicode escape", `{"a":"\u12"}`, ReasonBadJSON},
		{"trailing data", `{} {}`, ReasonBadJSON},
		{"trailing comma", `{"a":1,}`, ReasonBadJSON},
		{"leading zero", `{"a":01}`, ReasonBadJSON},
		{"bare dot", `{"a":1.}`, ReasonBadJSON},
		{"nan", `{"a":NaN}`, ReasonBadJSON},
		{"unterminated", `{"a":"x`, ReasonBadJSON},
		{"truncated literal", `{"a":tru`, ReasonBadJSON},
		{"array top", `[{}]`, ReasonBadJSON},
		{"empty", ``, ReasonBadJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Scan([]byte(tc.in))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && (err == nil || err.Reason != tc.want):
				t.Fatalf("got %v, want %s", err, tc.want)
			}
		})
	}
}

// Keys are matched exactly: a case variant of a payload field neither
// fills it nor shadows it.
func TestDecodeCaseVariantKeys(t *testing.T) {
	line := strings.Replace(validObs, `"provider_id":"n1"`, `"provider_id":"n1","Provider_ID":"evil"`, 1)
	_, p, err := Validator{Environment: EnvLocalParity}.DecodeEvent([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if id := p.(*Observation).ProviderID; id != "n1" {
		t.Fatalf("provider_id = %q", id)
	}
	line = strings.Replace(validObs, `"provider_id":"n1"`, `"PROVIDER_ID":"n1"`, 1)
	if _, _, err := (Validator{}).DecodeEvent([]byte(line)); err == nil || err.Field != "payload.provider_id" {
		t.Fatalf("case-variant key filled provider_id: %v", err)
	}
}

func TestDecodeEnvelopeEdgeCases(t *testing.T) {
	set := func(old, new string) string { return strings.Replace(validObs, old, new, 1) }
	v := Validator{Environment: EnvLocalParity}
	for _, tc := range []struct {
		name, line string
		reason     Reason
		field      string
		eventID    string // the envelope names it even on rejection
	}{
		{"duplicate event_id", set(`"event_id":"e1",`, `"event_id":"e1","event_id":"e2",`), ReasonDuplicateKey, "", ""},
		{"duplicate payload field", set(`"observed_state":"running"`, `"observed_state":"running","observed_state":"gone"`), ReasonDuplicateKey, "", ""},
		{"escaped id", set(`"event_id":"e1"`, `"event_id":"e\u0031"`), "", "", "e1"},
		{"null seq", set(`"seq":7`, `"seq":null`), "", "", "e1"},
		{"huge seq", set(`"seq":7`, `"seq":18446744073709551616`), ReasonWrongType, "seq", "e1"},
		{"max seq", set(`"seq":7`, `"seq":18446744073709551615`), "", "", "e1"},
		{"seq exponent", set(`"seq":7`, `"seq":7e0`), ReasonWrongType, "seq", "e1"},
		{"schema_version string", set(`"schema_version":1`, `"schema_version":"1"`), ReasonWrongType, "schema_version", "e1"},
		{"schema_version null", set(`"schema_version":1`, `"schema_version":null`), ReasonMissingField, "schema_version", "e1"},
		{"event_id number", set(`"event_id":"e1"`, `"event_id":1`), ReasonWrongType, "event_id", ""},
		{"payload null", set(`"payload":{`, `"payload":null,"x":{`), ReasonMissingField, "payload", "e1"},
		{"producer array", set(`"producer":"scanner"`, `"producer":["scanner"]`), ReasonWrongType, "producer", "e1"},
		{"wrong env keeps id", set(`"environment":"local_parity"`, `"environment":"dev"`), ReasonWrongEnvironment, "environment", "e1"},
		{"upper-case envelope key", set(`"event_id":"e1"`, `"EVENT_ID":"e1"`), ReasonMissingField, "event_id", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, _, err := v.DecodeEvent([]byte(tc.line))
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
			} else if err == nil || err.Reason != tc.reason || err.Field != tc.field {
				t.Fatalf("got %v, want %s field %q", err, tc.reason, tc.field)
			}
			if env.EventID != tc.eventID {
				t.Fatalf("event id %q, want %q", env.EventID, tc.eventID)
			}
		})
	}
}

// refScan is a reference for Scan built on encoding/json's tokenizer:
// valid (syntax and UTF-8), the maximum depth, and whether a duplicate key
// occurs.
func refScan(b []byte) (valid bool, depth int, dup bool) {
	if !stdjson.Valid(b) || !utf8.Valid(b) {
		return false, 0, false
	}
	dec := stdjson.NewDecoder(bytes.NewReader(b))
	type frame struct {
		obj    bool
		keys   map[string]bool
		expKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return true, depth, dup
		}
		if err != nil {
			return false, 0, false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.expKey {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					dup = true
				}
				top.keys[k] = true
				top.expKey = false
				continue
			}
		}
		if top != nil && top.obj {
			top.expKey = true
		}
		switch tok {
		case stdjson.Delim('{'):
			stack = append(stack, &frame{obj: true, keys: map[string]bool{}, expKey: true})
		case stdjson.Delim('['):
			stack = append(stack, &frame{})
		case stdjson.Delim('}'), stdjson.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].obj {
				stack[len(stack)-1].expKey = true
			}
		}
		depth = max(depth, len(stack))
	}
}

// FuzzScan checks Scan against the reference built on encoding/json: the
// same verdict on syntax, UTF-8, depth and duplicate keys, and no panic.
func FuzzScan(f *testing.F) {
	for _, s := range []string{validObs, `{"a":1,"a":2}`, `{"a":{"b":[[[]]]}}`, `{"\u0061":1,"a":2}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `{} `, `[1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Scan(b)
		valid, depth, dup := refScan(b)
		isObject := len(bytes.TrimLeft(b, " \t\r\n")) > 0 && bytes.TrimLeft(b, " \t\r\n")[0] == '{'
		switch {
		case !valid || !isObject:
			if err == nil {
				t.Fatalf("accepted invalid %q", b)
			}
			if err.Reason != ReasonBadJSON && err.Reason != ReasonTooDeep && err.Reason != ReasonDuplicateKey {
				t.Fatalf("reason %s for invalid input", err.Reason)
			}
		case depth > MaxDepth:
			if err == nil || (err.Reason != ReasonTooDeep && err.Reason != ReasonDuplicateKey) {
				t.Fatalf("depth %d: got %v", depth, err)
			}
		case dup:
			if err == nil || err.Reason != ReasonDuplicateKey {
				t.Fatalf("duplicate key: got %v", err)
			}
		default:
			if err != nil {
				t.Fatalf("rejected valid %q: %v", b, err)
			}
		}
	})
}
