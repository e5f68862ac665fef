package contract

import (
	"bytes"
	"encoding/binary"
	stdjson "encoding/json"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/encoding/iso8601"
)

// wireEnvelope encodes an envelope the way the Go producers do (fields in
// CONTRACT order, payload last).
type wireEnvelope struct {
	EventID       string  `json:"event_id"`
	EventType     string  `json:"event_type"`
	SchemaVersion int     `json:"schema_version"`
	Producer      string  `json:"producer"`
	Seq           *uint64 `json:"seq,omitempty"`
	OccurredAt    string  `json:"occurred_at"`
	CorrelationID string  `json:"correlation_id,omitempty"`
	Environment   string  `json:"environment"`
	Payload       any     `json:"payload"`
}

// wirePayloadFirst names the payload before the event type.
type wirePayloadFirst struct {
	Payload       any     `json:"payload"`
	EventID       string  `json:"event_id"`
	EventType     string  `json:"event_type"`
	SchemaVersion int     `json:"schema_version"`
	Producer      string  `json:"producer"`
	Seq           *uint64 `json:"seq"`
	OccurredAt    string  `json:"occurred_at"`
	CorrelationID *string `json:"correlation_id"`
	Environment   string  `json:"environment"`
}

// samplePayload returns a valid payload of event type typ, varied by i.
func samplePayload(typ string, i int) any {
	at := time.Date(2026, 11, 21, 10, 15, 30, i*1000, time.UTC)
	if i%3 == 1 {
		at = at.In(time.FixedZone("", 2*3600))
	}
	fam, prov := Families[i%len(Families)], Providers[i%len(Providers)]
	switch typ {
	case TypePlatformRecord:
		var tags []string
		switch i % 3 {
		case 1:
			tags = []string{}
		case 2:
			tags = []string{"team:a", fmt.Sprintf("t-%d", i), "ü<&>"}
		}
		return &PlatformRecord{RecordType: "node", RecordID: fmt.Sprintf("rec-%d", i), RecordVersion: int64(i + 1),
			ResourceFamily: fam, ProductID: "gpuaas", OwningDomain: "d", OwningPackage: "pkg", DomainID: "dom-1",
			Tags: tags, Provider: prov, ProviderID: fmt.Sprintf("n%d", i), ExpectedState: "running",
			ExpectedVersion: "v2", Deleted: i%2 == 0, Quota: []string{"", "12.5", "-3"}[i%3],
			RouteTarget: []string{"", "10.0.0.1:443"}[i%2], ExpectedAgentVersion: "1.2.3",
			CertIssuerFingerprint: "sha256:ab", IngressTrustFingerprint: "sha256:cd",
			NodeKind: []string{"", "EDGE", "RELAY"}[i%3], LifecycleIntent: []string{"", "ACTIVE", "PROVISIONING", "RETIRED"}[i%4],
			Authority: []Authority{{}, {MasterOfRecord: "REGION"}, {MasterOfRecord: "LOCAL", ControllerIDs: []string{"ctl-a", "ctl-\u00e9"}}}[i%3],
			Desired: []Desired{{}, {PolicyBundleID: "pb-1", TargetVersion: "2.0"},
				{PolicyBundleID: "pb-2", TargetVersion: "2.1", MaintenanceWindow: "sun 02:00-04:00", RequiresOnline: true}}[(i+1)%3]}
	case TypeProviderObservation:
		return &Observation{Provider: prov, ProviderID: fmt.Sprintf("n%d", i), ResourceFamily: fam,
			ObservedState: "running", ObservedVersion: "v1", OwnerRef: []string{"", "owner/1"}[i%2],
			Usage: []string{"", "12.5", "0"}[i%3], RouteTarget: []string{"", "10.0.0.1:443", "", "host\tname"}[i%4]}
	case TypeScanCompleted:
		return &ScanCompleted{Provider: prov, ScanID: fmt.Sprintf("scan-%d", i), ScanStartedAt: at}
	case TypeHeartbeat:
		return &Heartbeat{NodeID: fmt.Sprintf("node-%d", i), AgentVersion: "1.2.3", CertIssuerFingerprint: "c",
			IngressTrustFingerprint: "t", HostFingerprint: "h", NodeAgentReason: []string{"", "restart"}[i%2],
			UpdatePath: "self_update", TerminalStreamProbe: "passed", WorkloadImpact: "none_observed",
			Health: []string{"OK", "DEGRADED", "FAILED", "UNKNOWN"}[i%4],
			RTTMs:  []float64{12, 12.5, 0.001, 1e21}[i%4], LossPct: []float64{0, 0.25, 100}[i%3],
			BandwidthKbps: float64(1000 * i), BacklogMessages: int64(i * 7), SecondsBehind: int64(i % 2), ReplayRequired: i%2 == 1,
			ReportedVersion: []string{"", "2.0"}[i%2], ArtifactID: []string{"", "art-1"}[i%2], ArtifactDigest: []string{"", sampleDigest}[i%2],
			ControllerID: []string{"", "ctl-a"}[i%2], RelayID: []string{"", "relay-1", ""}[i%3], UptimeS: int64(i * 60),
			PolicyBundleID: []string{"", "pb-1"}[i%2]}
	case TypeUsageRecorded:
		return &Usage{UsageID: fmt.Sprintf("usage-%d", i), MeteringSource: "gpu-meter", MeteringID: fmt.Sprintf("m-%d", i),
			UnitID: "gpu_hour", Quantity: fmt.Sprintf("%d.%06d", i, i*7919%1000000), ProductID: "gpuaas",
			TenantID: "tenant-1", ProjectID: "p-1", RecordID: []string{"", "rec-1"}[i%2],
			WindowStart: at, WindowEnd: at.Add(15 * time.Minute)}
	case TypeBillingRated:
		return &Rated{UsageID: fmt.Sprintf("usage-%d", i), MeteringSource: "gpu-meter", MeteringID: fmt.Sprintf("m-%d", i),
			UnitID: "gpu_hour", UnitVersion: int64(1 + i), Quantity: "1.5", UnitPrice: "2.000000", Amount: "3.0000",
			Currency: "EUR", TenantID: "tenant-1", ProductID: "gpuaas", RatedAt: at}
	case TypeLedgerEntry:
		return &LedgerEntry{LedgerEntryID: fmt.Sprintf("le-%d", i), UsageID: fmt.Sprintf("usage-%d", i),
			MeteringSource: "gpu-meter", MeteringID: fmt.Sprintf("m-%d", i), Amount: "3.0000", Currency: "EUR", PostedAt: at}
	case TypeArtifact:
		return &Artifact{ArtifactID: fmt.Sprintf("art-%d", i), Version: "2.0", Digest: sampleDigest,
			SignedBy: []string{"", "release-key-1"}[i%2], SBOMRef: []string{"", "sbom://art"}[i%2],
			ProvenanceRef: []string{"", "prov://art"}[i%2], Revoked: i%3 == 2}
	case TypePolicyBundle:
		return &PolicyBundle{PolicyBundleID: fmt.Sprintf("pb-%d", i), TargetVersion: "2.0", ArtifactID: "art-1",
			Domains: [][]string{nil, {}, {"dom-1", "dom-\u00e9"}}[i%3], Deadline: at}
	case TypeCommand:
		return &Command{CommandID: fmt.Sprintf("cmd-%d", i), EvidenceID: "orphan_provider_resource:maas/n-1", Provider: ProviderMAAS,
			ProviderID: "n-1", Action: string(Actions[i%len(Actions)]), Reason: []string{"", "on it", "ü<&>"}[i%3],
			Assignee: []string{"", "ops-eu"}[i%2], Until: []time.Time{{}, at}[i%2], IdempotencyKey: fmt.Sprintf("k-%d", i),
			ActorID: "HUMAN::local-operator"}
	}
	panic("unknown type " + typ)
}

// sampleDigest is an artifact digest of the contract's form.
const sampleDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// sampleEvent encodes a valid event of type typ, varied by i.
func sampleEvent(typ string, i int) []byte {
	seq := uint64(i)
	env := wireEnvelope{
		EventID: fmt.Sprintf("e-%08d", i), EventType: typ, SchemaVersion: 1, Producer: "producer-1",
		OccurredAt:  time.Date(2026, 11, 21, 10, 15, 30, 123000000, time.UTC).Format(time.RFC3339Nano),
		Environment: EnvLocalParity, Payload: samplePayload(typ, i),
	}
	if i%2 == 0 {
		env.Seq, env.CorrelationID = &seq, fmt.Sprintf("corr-%d", i)
	}
	b, err := stdjson.Marshal(env)
	if err != nil {
		panic(err)
	}
	return b
}

// sampleEvents returns valid events of every type in the encodings the
// fast path decodes itself: as the Go producers write them, indented,
// with the payload first, with unknown fields and escapes.
func sampleEvents() [][]byte {
	var out [][]byte
	for _, typ := range append(AllTypes[:len(AllTypes):len(AllTypes)], TypeCommand) {
		for i := range 6 {
			line := sampleEvent(typ, i)
			out = append(out, line)
			switch i {
			case 1:
				var ind strings.Builder
				ind.WriteString(" \r\n")
				b, _ := stdjson.MarshalIndent(stdjson.RawMessage(line), "", "\t")
				ind.Write(b)
				ind.WriteString("\n")
				out = append(out, []byte(ind.String()))
			case 2:
				corr := "c\"1"
				pf := wirePayloadFirst{Payload: samplePayload(typ, i), EventID: "e-\u00e9\\2", EventType: typ, SchemaVersion: 1,
					Producer: "p<1>", OccurredAt: "2026-11-21T10:15:30+01:00", CorrelationID: &corr, Environment: EnvLocalParity}
				b, _ := stdjson.Marshal(pf)
				out = append(out, b)
				pf.CorrelationID = nil
				b, _ = stdjson.Marshal(pf)
				out = append(out, b)
			case 3:
				s := strings.Replace(string(line), `{`, `{"x_env":"v\u00e9","x_num":-1.5e3,"x_t":true,"x_f":false,"x_null":null,`, 1)
				s = strings.Replace(s, `"payload":{`, `"payload":{"zz":"ignored","zz2":0,`, 1)
				out = append(out, []byte(s))
			}
		}
	}
	return out
}

// sameAsReference decodes line with the reference decoder and with every
// fast mode (Validator, Decoder; owned and ZeroCopy strings; with and
// without an environment) and fails on any difference in envelope,
// payload or error. It reports whether the fast path accepted the line
// itself.
func sameAsReference(t *testing.T, line []byte) (fast bool) {
	t.Helper()
	for _, v := range []Validator{{Environment: EnvLocalParity}, {ZeroCopy: true}, {Environment: EnvDev, ZeroCopy: true}} {
		renv, rp, rerr := v.decodeEventRef(line)
		fenv, fp, _, ok := v.fastDecode(line, nil, false)
		if ok {
			fast = true
			if rerr != nil {
				t.Fatalf("fast path accepted what the reference rejects (%v): %q", rerr, line)
			}
			if !reflect.DeepEqual(renv, fenv) || !reflect.DeepEqual(rp, fp) {
				t.Fatalf("fast path differs on %q:\n ref  %+v %+v\n fast %+v %+v", line, renv, rp, fenv, fp)
			}
		}
		env, p, err := v.DecodeEvent(line)
		if !reflect.DeepEqual(renv, env) || !reflect.DeepEqual(rp, p) || !reflect.DeepEqual(rerr, err) {
			t.Fatalf("DecodeEvent differs on %q:\n ref %+v %+v %v\n got %+v %+v %v", line, renv, rp, rerr, env, p, err)
		}
		dec := NewDecoder(v)
		for range 2 { // the second call reuses the first one's structs
			env, p, err = dec.DecodeEvent(line)
			if !reflect.DeepEqual(renv, env) || !reflect.DeepEqual(rp, p) || !reflect.DeepEqual(rerr, err) {
				t.Fatalf("Decoder differs on %q:\n ref %+v %+v %v\n got %+v %+v %v", line, renv, rp, rerr, env, p, err)
			}
			// The digest computed in the decoder's pass is EventDigest's.
			var d Digest
			env, p, d, err = dec.DecodeEventDigest(line)
			if !reflect.DeepEqual(renv, env) || !reflect.DeepEqual(rp, p) || !reflect.DeepEqual(rerr, err) {
				t.Fatalf("DecodeEventDigest differs on %q:\n ref %+v %+v %v\n got %+v %+v %v", line, renv, rp, rerr, env, p, err)
			}
			if want := Digest(0); rerr == nil {
				if want = EventDigest(&renv); d != want {
					t.Fatalf("DecodeEventDigest's digest of %q is %s, EventDigest's %s", line, d, want)
				}
			} else if d != 0 {
				t.Fatalf("DecodeEventDigest of rejected %q returned digest %s", line, d)
			}
			env, p, d, err = dec.DecodeEventPayloadDigest(line)
			if !reflect.DeepEqual(renv, env) || !reflect.DeepEqual(rp, p) || !reflect.DeepEqual(rerr, err) {
				t.Fatalf("DecodeEventPayloadDigest differs on %q:\n ref %+v %+v %v\n got %+v %+v %v", line, renv, rp, rerr, env, p, err)
			}
			if want := Digest(0); rerr == nil {
				if want = PayloadDigest(renv.Payload); d != want {
					t.Fatalf("DecodeEventPayloadDigest's digest of %q is %s, PayloadDigest's %s", line, d, want)
				}
			} else if d != 0 {
				t.Fatalf("DecodeEventPayloadDigest of rejected %q returned digest %s", line, d)
			}
		}
	}
	return fast
}

// The fast path decodes every valid sample itself, with the reference's
// result, and a Decoder's payload for one type survives events of other
// types but not the next of its own.
func TestFastPathSamples(t *testing.T) {
	for _, line := range sampleEvents() {
		if !sameAsReference(t, line) {
			t.Errorf("fast path left a valid sample to the reference decoder: %s", line)
		}
	}
}

// Lines the fast path leaves to the reference decoder still decode (or
// are rejected) exactly as before.
func TestFastPathFallback(t *testing.T) {
	obs := func(old, new string) string {
		if !strings.Contains(validObs, old) {
			t.Fatalf("fixture lacks %s", old)
		}
		return strings.Replace(validObs, old, new, 1)
	}
	for _, line := range []string{
		obs(`"provider_id"`, `"provider\u005fid"`),                                     // escaped key
		obs(`"seq":7`, `"seq":7,"x":{"y":[1,{"z":null}]}`),                             // unknown object
		obs(`"usage":"12.5"`, `"usage":null`),                                          // null payload field
		obs(`"occurred_at":"2026`, `"occurred_at":"\u0032026`),                         // escaped time
		obs(`"observed_version":"v1"`, `"observed_version":"\ud83d\ude00"`),            // surrogate pair
		obs(`"observed_version":"v1"`, `"observed_version":"\ud800x"`),                 // lone surrogate
		obs(`"usage":"12.5"`, `"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9`), // many unknown keys
		obs(`"seq":7`, `"seq":7,"z":1,"z":2`),                                          // duplicate unknown key
		obs(`"producer":"scanner"`, `"producer":"scanner","producer":"x"`),             // duplicate known key
	} {
		if sameAsReference(t, []byte(line)) {
			t.Errorf("fast path decided %s", line)
		}
	}
	line := sampleEvent(TypeHeartbeat, 1)
	for _, hb := range []string{`"rtt_ms":1.0e2`, `"backlog_messages":1.0`, `"backlog_messages":-1`, `"rtt_ms":-0`, `"rtt_ms":1e400`, `"replay_required":null`} {
		field, _, _ := strings.Cut(hb, ":")
		s := string(line)
		i := strings.Index(s, field)
		j := i + strings.IndexAny(s[i:], ",}")
		sameAsReference(t, []byte(s[:i]+hb+s[j:]))
	}
}

func TestDecoderReuse(t *testing.T) {
	dec := NewDecoder(Validator{ZeroCopy: true})
	_, p1, err := dec.DecodeEvent(sampleEvent(TypeProviderObservation, 1))
	if err != nil {
		t.Fatal(err)
	}
	_, p2, err := dec.DecodeEvent(sampleEvent(TypeProviderObservation, 2))
	if err != nil {
		t.Fatal(err)
	}
	if p1 != p2 || p2.(*Observation).ProviderID != "n2" {
		t.Fatalf("Decoder did not reuse its observation: %p %p", p1, p2)
	}
	_, p3, _ := NewDecoder(Validator{}).DecodeEvent(sampleEvent(TypeProviderObservation, 1))
	_, p4, _ := Validator{}.DecodeEvent(sampleEvent(TypeProviderObservation, 1))
	if p3 == p4 {
		t.Fatal("Validator returned a Decoder's struct")
	}
}

// The common events decode without allocating through a Decoder with
// ZeroCopy (a string with escapes is the exception: it is unescaped into
// a new string).
func TestDecoderAllocs(t *testing.T) {
	dec := NewDecoder(Validator{Environment: EnvLocalParity, ZeroCopy: true})
	for _, typ := range AllTypes {
		for _, i := range []int{0, 1, 4} { // without escapes; UTC and +02:00 times
			line := sampleEvent(typ, i)
			if n := testing.AllocsPerRun(100, func() {
				if _, _, err := dec.DecodeEvent(line); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("%s: %v allocations per event: %s", typ, n, line)
			}
		}
	}
}

// FuzzDecodeFast holds the single-pass decoder to the reference decoder:
// on every input, the same envelope, payload and error (reason, field and
// detail) in every mode, and acceptance by the fast path only of what the
// reference accepts.
func FuzzDecodeFast(f *testing.F) {
	for _, line := range sampleEvents() {
		f.Add(line)
	}
	// The seeds of FuzzScan and FuzzDecode, and the rejections of the
	// decoder's tests, as edits of a valid observation.
	for _, s := range []string{validObs, noPayload + `}`, `{"payload":{"a":{"b":{"c":[[[[]]]]}}}}`, `{"event_id":"a","event_id":"b"}`,
		`{"a":1,"a":2}`, `{"a":{"b":[[[]]]}}`, `{"\u0061":1,"a":2}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `{} `, `[1]`,
		noPayload + `,"payload":[1]}`, `{"event_id":`} {
		f.Add([]byte(s))
	}
	for _, edit := range [][2]string{
		{`"scanner"`, "\"sc\xffanner\""}, {`"event_id":"e1",`, ``}, {`"producer":"scanner"`, `"producer":""`},
		{`"seq":7`, `"seq":"7"`}, {`"seq":7`, `"seq":-7`}, {`"seq":7`, `"seq":null`}, {`"seq":7`, `"seq":18446744073709551616`},
		{`"seq":7`, `"seq":18446744073709551615`}, {`"seq":7`, `"seq":7e0`}, {`"schema_version":1`, `"schema_version":1.5`},
		{`"schema_version":1`, `"schema_version":2`}, {`"schema_version":1`, `"schema_version":"1"`},
		{`"usage":"12.5"`, `"usage":12.5`}, {`"usage":"12.5"`, `"usage":"1e3"`}, {`"provider.observation"`, `"provider.guess"`},
		{`2026-11-21T10:15:30.123Z`, `yesterday`}, {`2026-11-21T10:15:30.123Z`, `2026-11-21T12:15:30.123+02:00`},
		{`"environment":"local_parity"`, `"environment":"prod"`}, {`"provider_id":"n1",`, ``},
		{`"resource_family":"gpuaas_allocation"`, `"resource_family":"gpu"`}, {`"event_id":"e1"`, `"event_id":"e\u0031"`},
		{`"event_id":"e1"`, `"EVENT_ID":"e1"`}, {`"payload":{`, `"payload":null,"x":{`}, {`"provider_id":"n1"`, `"Provider_ID":"evil","provider_id":"n1"`},
		{`"observed_state":"running"`, `"observed_state":"running","observed_state":"gone"`},
	} {
		f.Add([]byte(strings.Replace(validObs, edit[0], edit[1], 1)))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		sameAsReference(t, line)
	})
}

func TestEnumerations(t *testing.T) {
	valid := func(family, provider string) bool {
		o := Observation{Provider: provider, ProviderID: "p1", ResourceFamily: family, ObservedState: "running"}
		return o.validate() == nil
	}
	for _, f := range Families {
		if !valid(f, ProviderMAAS) {
			t.Errorf("family %s rejected", f)
		}
	}
	for _, p := range Providers {
		if !valid(FamilyGPUaaS, p) {
			t.Errorf("provider %s rejected", p)
		}
	}
	if valid("gpu", ProviderMAAS) || valid(FamilyGPUaaS, "MAAS") {
		t.Error("unknown value accepted")
	}
}

// iso8601.Parse, which decodes the payload's times in the reference
// decoder and the envelope's occurred_at in the fast path, returns what
// time.Parse(time.RFC3339Nano, ...) returns whenever it accepts a time:
// the envelope rule is time.Parse's.
func TestISO8601IsTimeParse(t *testing.T) {
	check := func(s string) {
		t.Helper()
		want, werr := time.Parse(time.RFC3339Nano, s)
		got, err := iso8601.Parse(s)
		if err == nil && (werr != nil || !reflect.DeepEqual(got, want)) {
			t.Fatalf("%s: iso8601 %v, time.Parse %v %v", s, got, want, werr)
		}
	}
	for _, y := range []int{0, 1, 4, 99, 100, 400, 1582, 1899, 1900, 1969, 1970, 2000, 2024, 2026, 2100, 2400, 9999} {
		for m := 0; m <= 13; m++ {
			for _, d := range []int{0, 1, 15, 28, 29, 30, 31, 32} {
				for _, tod := range []string{"00:00:00", "23:59:59", "12:34:56", "24:00:00", "23:60:00", "23:59:60"} {
					for _, frac := range []string{"", ".123", ".000000001", ".1234567891", "."} {
						for _, zone := range []string{"Z", "+02:00", "-00:30", "+00:00", "z"} {
							check(fmt.Sprintf("%04d-%02d-%02dT%s%s%s", y, m, d, tod, frac, zone))
						}
					}
				}
			}
		}
	}
	for _, s := range []string{"2026-11-21t10:15:30Z", "2026-1a-21T10:15:30Z", "2026-11-21T10:15:3Z", "+026-11-21T10:15:30Z", "2026-11-21 10:15:30Z", ""} {
		check(s)
	}
}

// quotedKey.at finds a key exactly where comparing the bytes does (it
// loads at least eight bytes, so it misses a key the line ends less than
// eight bytes after it starts, which then goes the slow way): for keys of
// every length, with each byte of the key changed, and near the end of
// the line.
func TestQuotedKeyAt(t *testing.T) {
	names := []string{"", "a", "seq", "tags", "usage", "event_id", "ingress_trust_fingerprint", "abcdefghijklmnopqrstuvwxyz01", "abcdefghijklmnopqrstuvwxyz012", "abcdefghijklmnopqrstuvwxyz0123456"}
	names = append(names, fieldNames[:]...)
	for _, f := range platformRecordFields {
		names = append(names, f.name)
	}
	for _, name := range names {
		k := newQuotedKey(name)
		q := `"` + name + `":`
		check := func(line []byte, i int) {
			t.Helper()
			want := len(q) <= 32 && len(line)-i >= max(len(q), 8) && string(line[i:i+len(q)]) == q
			if got := k.at(line, i); got != want {
				t.Fatalf("%q at %d of %q: %v, want %v", q, i, line, got, want)
			}
		}
		for _, tail := range []string{"", "1", "1}", `"value"}`, "1234567890123456789012345678901234567890"} {
			line := []byte(" " + q + tail)
			check(line, 1)
			check(line[:len(line)-1], 1)
			for j := 1; j < 1+len(q); j++ {
				for _, c := range []byte{0, '"', 'a', 0x80, line[j] ^ 1, line[j] ^ 0x80} {
					if c == line[j] {
						continue
					}
					edited := bytes.Clone(line)
					edited[j] = c
					check(edited, 1)
				}
			}
		}
	}
}

// special flags exactly the first byte of a word that is not plain (and
// nothing in a word of plain bytes), whatever the bytes above it.
func TestSpecial(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var plain []byte
	for c := range 256 {
		if plainByte[c] {
			plain = append(plain, byte(c))
		}
	}
	for range 200000 {
		var w [8]byte
		k := rng.IntN(9) // the first byte that is not plain; 8: none
		for j := range w {
			switch {
			case j < k:
				w[j] = plain[rng.IntN(len(plain))]
			case j == k:
				for w[j] = byte(rng.IntN(256)); plainByte[w[j]]; w[j] = byte(rng.IntN(256)) {
				}
			default:
				w[j] = byte(rng.IntN(256))
			}
		}
		m := special(binary.LittleEndian.Uint64(w[:]))
		if k == 8 && m != 0 || k < 8 && (m == 0 || bits.TrailingZeros64(m) != 8*k+7) {
			t.Fatalf("special(% x) = %#x: first byte not plain is %d", w, m, k)
		}
	}
}

// fastScan.str checks strings as Scan does, and plainQuote finds the
// closing quote of a plain string whenever its word fits in the line, or
// else stops at the start of the word it cannot decide.
func TestFastStr(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("ab\"\\/\x00\x1f\x7f\x80\xc3\xa9\xffunrt0")
	for range 200000 {
		n := rng.IntN(40)
		line := make([]byte, 1, 1+n)
		line[0] = '"'
		for range n {
			if rng.IntN(4) == 0 {
				line = append(line, alphabet[rng.IntN(len(alphabet))])
			} else {
				line = append(line, 'a'+byte(rng.IntN(26)))
			}
		}
		s := getScanner(line)
		wantEnd, wantEsc := s.str(0)
		wantOK := s.err == nil
		putScanner(s)
		d := &fastScan{b: line}
		end, esc, ok := d.str(0)
		if ok != wantOK || ok && (end != wantEnd || esc != wantEsc) {
			t.Fatalf("str(%q) = %d %v %v, Scan %d %v %v", line, end, esc, ok, wantEnd, wantEsc, wantOK)
		}
		w := 1
	words:
		for ; w+8 <= len(line); w += 8 {
			for j := w; j < w+8; j++ {
				if !plainByte[line[j]] {
					break words
				}
			}
		}
		want := ^w
		for j := w; j < w+8 && j < len(line); j++ {
			if !plainByte[line[j]] {
				if line[j] == '"' && w+8 <= len(line) {
					want = j
				}
				break
			}
		}
		if q := plainQuote(line, 1); q != want {
			t.Fatalf("plainQuote(%q) = %d, want %d", line, q, want)
		}
	}
}
