package fleet

import (
	"bytes"
	"crypto/sha256"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/pipeline/contract"
)

func newGen(t testing.TB, cfg Config) *Generator {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return g
}

// collect returns every event of g, with Line and Key copied.
func collect(t testing.TB, g *Generator) []Event {
	t.Helper()
	var out []Event
	err := g.Emit(func(e *Event) error {
		c := *e
		c.Line = bytes.Clone(e.Line)
		c.Key = bytes.Clone(e.Key)
		out = append(out, c)
		return nil
	})
	if err != nil {
		t.Fatalf("Emit: %v", err)
	}
	return out
}

func digest(t testing.TB, g *Generator) [32]byte {
	t.Helper()
	h := sha256.New()
	if err := g.Emit(func(e *Event) error { h.Write(e.Line); h.Write([]byte{'\n'}); return nil }); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

func TestDeterministic(t *testing.T) {
	cfg := DefaultConfig()
	a := digest(t, newGen(t, cfg))
	if b := digest(t, newGen(t, cfg)); a != b {
		t.Fatal("same seed gave different output")
	}
	g := newGen(t, cfg)
	if b := digest(t, g); b != digest(t, g) || a != b {
		t.Fatal("a second Emit gave different output")
	}
	cfg.Seed = 2
	if b := digest(t, newGen(t, cfg)); a == b {
		t.Fatal("different seeds gave the same output")
	}
}

// decoded is an event decoded by the shared validator.
type decoded struct {
	Event
	env     contract.Envelope
	payload any
}

func decodeAll(t *testing.T, evs []Event) []decoded {
	t.Helper()
	v := contract.Validator{Environment: contract.EnvLocalParity}
	out := make([]decoded, len(evs))
	for i, e := range evs {
		env, verr := v.Decode(e.Line)
		if verr != nil {
			t.Fatalf("event %d rejected: %v\n%s", i, verr, e.Line)
		}
		p, perr := contract.DecodePayload(env.EventType, env.Payload)
		if perr != nil {
			t.Fatalf("event %d payload: %v", i, perr)
		}
		if env.EventType != e.Type || !env.OccurredAt.Equal(e.OccurredAt) {
			t.Fatalf("event %d: Event fields disagree with line %s", i, e.Line)
		}
		if k := contract.KeyOf(p); k != string(e.Key) {
			t.Fatalf("event %d: key %q, want %q", i, e.Key, k)
		}
		out[i] = decoded{Event: e, env: env, payload: p}
	}
	return out
}

func TestValidAndUnique(t *testing.T) {
	g := newGen(t, DefaultConfig())
	evs := decodeAll(t, collect(t, g))
	ids := map[string][]byte{}
	seqs := map[string]uint64{}
	for i, d := range evs {
		if prev, ok := ids[d.env.EventID]; ok {
			if !d.Redelivery || !bytes.Equal(prev, d.Line) {
				t.Fatalf("event %d: event_id %s repeated by a non-redelivery", i, d.env.EventID)
			}
			continue
		}
		if d.Redelivery {
			t.Fatalf("event %d: redelivery of an event not sent before", i)
		}
		ids[d.env.EventID] = d.Line
		if !d.env.HasSeq || d.env.Seq <= seqs[d.env.Producer] {
			t.Fatalf("event %d: producer %s seq %d not increasing (last %d)", i, d.env.Producer, d.env.Seq, seqs[d.env.Producer])
		}
		seqs[d.env.Producer] = d.env.Seq
	}
}

func TestRedeliveriesStayInRound(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DuplicateRate = 0.05
	evs := collect(t, newGen(t, cfg))
	type pos struct {
		phase Phase
		round int
		line  []byte
	}
	first := map[string]pos{}
	n := 0
	for i, e := range evs {
		id := eventID(e.Line)
		p, seen := first[id]
		if !e.Redelivery {
			first[id] = pos{e.Phase, e.Round, e.Line}
			continue
		}
		n++
		if !seen || p.phase != e.Phase || p.round != e.Round || !bytes.Equal(p.line, e.Line) {
			t.Fatalf("event %d: redelivery is not an exact copy from the same round", i)
		}
	}
	if want := float64(len(evs)) * cfg.DuplicateRate; float64(n) < want/2 || float64(n) > want*2 {
		t.Fatalf("%d redeliveries in %d events, want about %.0f", n, len(evs), want)
	}
}

func eventID(line []byte) string {
	const p = `{"event_id":"`
	rest := line[len(p):]
	return string(rest[:bytes.IndexByte(rest, '"')])
}

// identityView is what the events say about one identity.
type identityView struct {
	records []*contract.PlatformRecord
	obs     map[int]*contract.Observation // by round
}

func views(evs []decoded) map[string]*identityView {
	m := map[string]*identityView{}
	get := func(k string) *identityView {
		v := m[k]
		if v == nil {
			v = &identityView{obs: map[int]*contract.Observation{}}
			m[k] = v
		}
		return v
	}
	for _, d := range evs {
		if d.Redelivery {
			continue
		}
		switch p := d.payload.(type) {
		case *contract.PlatformRecord:
			v := get(contract.KeyOf(p))
			v.records = append(v.records, p)
		case *contract.Observation:
			get(contract.KeyOf(p)).obs[d.Round] = p
		}
	}
	return m
}

func TestKindsLookAsSpecified(t *testing.T) {
	cfg := DefaultConfig()
	g := newGen(t, cfg)
	evs := decodeAll(t, collect(t, g))
	vs := views(evs)
	truth := g.Truth()
	byKind := map[string][]Finding{}
	for _, f := range truth.Findings {
		if f.FromNodeAgent() || f.FromFleetCore() {
			continue // node-agent evidence: checked against NodeTruth by pipeline/joiner/nodeagent; fleet core: TestFleetCore
		}
		byKind[f.Kind] = append(byKind[f.Kind], f)
	}
	latest := func(v *identityView) *contract.PlatformRecord {
		var best *contract.PlatformRecord
		for _, r := range v.records {
			if best == nil || r.RecordVersion > best.RecordVersion {
				best = r
			}
		}
		return best
	}
	for kind, fs := range byKind {
		if len(fs) == 0 {
			t.Fatalf("no %s in the default fleet", kind)
		}
		for _, f := range fs {
			v := vs[contract.IdentityKey(f.Provider, f.ProviderID)]
			if v == nil {
				t.Fatalf("%s: no events", f.EvidenceID)
			}
			rec := latest(v)
			switch kind {
			case "missing":
				if len(v.obs) != 0 || rec == nil {
					t.Fatalf("%s: missing resource observed or without record", f.EvidenceID)
				}
				continue
			case "orphan_unowned":
				if rec != nil {
					t.Fatalf("%s: orphan has a record", f.EvidenceID)
				}
			case "orphan_released":
				if rec.ExpectedState != "released" {
					t.Fatalf("%s: expected_state %q", f.EvidenceID, rec.ExpectedState)
				}
			case "orphan_deleted":
				if !rec.Deleted || rec.RecordVersion != 2 {
					t.Fatalf("%s: latest record not a deleted version 2", f.EvidenceID)
				}
			}
			if len(v.obs) != cfg.Rounds {
				t.Fatalf("%s: observed in %d rounds", f.EvidenceID, len(v.obs))
			}
			for r, o := range v.obs {
				agreeState := rec != nil && o.ObservedState == rec.ExpectedState
				agreeVersion := rec != nil && o.ObservedVersion == rec.ExpectedVersion
				switch kind {
				case "orphan_unowned", "orphan_released", "orphan_deleted":
					if !slices.Contains([]string{"allocated", "running", "attached", "serving"}, o.ObservedState) {
						t.Fatalf("%s: orphan observed %q", f.EvidenceID, o.ObservedState)
					}
				case "stale_state":
					if agreeState || !agreeVersion {
						t.Fatalf("%s round %d: state should differ, version agree", f.EvidenceID, r)
					}
				case "stale_version":
					if !agreeState || agreeVersion {
						t.Fatalf("%s round %d: version should differ, state agree", f.EvidenceID, r)
					}
				case "stale_resolved":
					if agreeState != (r > 0) || !agreeVersion {
						t.Fatalf("%s round %d: state agreement %v", f.EvidenceID, r, agreeState)
					}
				case "quota":
					if !decimalGreater(o.Usage, rec.Quota) {
						t.Fatalf("%s: usage %s not above quota %s", f.EvidenceID, o.Usage, rec.Quota)
					}
				case "route":
					if o.RouteTarget == rec.RouteTarget || o.RouteTarget == "" {
						t.Fatalf("%s: route agrees", f.EvidenceID)
					}
				case "owner_ref":
					if o.OwnerRef == rec.RecordID || o.OwnerRef == "" {
						t.Fatalf("%s: owner_ref %q", f.EvidenceID, o.OwnerRef)
					}
				}
			}
		}
	}
	// Healthy: every round agrees exactly with the latest record.
	bad := map[string]bool{}
	for _, f := range truth.Findings {
		if f.FromNodeAgent() || f.FromFleetCore() {
			continue // a healthy resource as far as records and observations go
		}
		bad[contract.IdentityKey(f.Provider, f.ProviderID)] = true
	}
	healthy := 0
	for k, v := range vs {
		if bad[k] {
			continue
		}
		healthy++
		rec := latest(v)
		if rec == nil || rec.Deleted || len(v.obs) != cfg.Rounds {
			t.Fatalf("%s: healthy resource without record or not observed every round", k)
		}
		for _, o := range v.obs {
			if o.ObservedState != rec.ExpectedState || o.ObservedVersion != rec.ExpectedVersion ||
				o.RouteTarget != rec.RouteTarget || o.OwnerRef != rec.RecordID ||
				(rec.Quota != "" && decimalGreater(o.Usage, rec.Quota)) {
				t.Fatalf("%s: healthy resource disagrees: %+v vs %+v", k, o, rec)
			}
		}
	}
	if healthy != truth.Kinds["healthy"] {
		t.Fatalf("%d healthy identities, truth says %d", healthy, truth.Kinds["healthy"])
	}
}

func decimalGreater(a, b string) bool {
	x, ok1 := new(big.Rat).SetString(a)
	y, ok2 := new(big.Rat).SetString(b)
	return ok1 && ok2 && x.Cmp(y) > 0
}

func TestReplayedRecordsChangeNothing(t *testing.T) {
	g := newGen(t, DefaultConfig())
	evs := decodeAll(t, collect(t, g))
	replays := 0
	for _, d := range evs {
		if d.Redelivery || d.Phase != PhaseRound {
			continue
		}
		if p, ok := d.payload.(*contract.PlatformRecord); ok {
			if d.env.CorrelationID == corrRecordsIntent {
				continue // a lifecycle intent's version 2, not a replay
			}
			replays++
			if p.RecordVersion != 1 || d.Round != g.replayRound() || d.OccurredAt.After(g.cfg.Start) {
				t.Fatalf("replay %s: version %d round %d at %v", p.RecordID, p.RecordVersion, d.Round, d.OccurredAt)
			}
		}
	}
	if replays == 0 {
		t.Fatal("no late replays in the default fleet")
	}
}

func TestTimeline(t *testing.T) {
	cfg := DefaultConfig()
	g := newGen(t, cfg)
	evs := decodeAll(t, collect(t, g))
	lastObs := map[string]time.Time{} // provider -> last observation in round
	marked := map[string]bool{}
	round := -1
	for i, d := range evs {
		if d.Redelivery {
			continue
		}
		if d.Round != round {
			for p := range lastObs {
				if !marked[p] {
					t.Fatalf("round %d: provider %s has no scan marker", round, p)
				}
			}
			round, lastObs, marked = d.Round, map[string]time.Time{}, map[string]bool{}
		}
		switch p := d.payload.(type) {
		case *contract.PlatformRecord:
			if d.Phase == PhaseRecords && !d.OccurredAt.Before(cfg.Start) {
				t.Fatalf("event %d: record at %v, not before Start", i, d.OccurredAt)
			}
		case *contract.Observation:
			if marked[p.Provider] {
				t.Fatalf("event %d: observation of %s after its scan marker", i, p.Provider)
			}
			rs := g.roundStart(d.Round)
			if d.OccurredAt.Before(rs) || !d.OccurredAt.Before(rs.Add(cfg.ObservationSpread)) {
				t.Fatalf("event %d: observation at %v outside its round", i, d.OccurredAt)
			}
			if d.OccurredAt.After(lastObs[p.Provider]) {
				lastObs[p.Provider] = d.OccurredAt
			}
			if d.env.CorrelationID != "scan-"+p.Provider+"-"+itoa(d.Round) {
				t.Fatalf("event %d: correlation_id %q", i, d.env.CorrelationID)
			}
		case *contract.ScanCompleted:
			if marked[p.Provider] {
				t.Fatalf("event %d: second scan marker of %s in round %d", i, p.Provider, d.Round)
			}
			marked[p.Provider] = true
			if !p.ScanStartedAt.Equal(g.roundStart(d.Round)) || !d.OccurredAt.After(lastObs[p.Provider]) {
				t.Fatalf("event %d: marker %+v at %v, last observation %v", i, p, d.OccurredAt, lastObs[p.Provider])
			}
		}
	}
}

func itoa(i int) string { return string(appendPadded(nil, i, 1)) }

func TestRatesExact(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Seed = 7
	g := newGen(t, cfg)
	truth := g.Truth()
	want := map[string]int{}
	for f := range families {
		n := g.per[f] * cfg.Domains
		for k := KindHealthy + 1; k < numKinds; k++ {
			if families[f].applies(k) {
				want[k.String()] += roundCount(cfg.Drift.rate(k), n)
			}
		}
	}
	for k, n := range want {
		if truth.Kinds[k] != n {
			t.Errorf("kind %s: %d resources, want %d", k, truth.Kinds[k], n)
		}
	}
	nodes := cfg.NodesPerDomain * cfg.Domains
	for k := NodeHealthy + 1; k < numNodeKinds; k++ {
		if got, w := truth.Nodes.Counts[k.String()], roundCount(cfg.Node.rate(k), nodes); got != w {
			t.Errorf("node kind %s: %d, want %d", k, got, w)
		}
	}
	classes := map[string]int{}
	for _, f := range truth.Findings {
		classes[f.Classification]++
	}
	if !mapsEqual(classes, truth.Counts) {
		t.Errorf("counts %v, findings say %v", truth.Counts, classes)
	}
	if d := truth.Compare(truth.Findings, CompareOptions{}); !d.Empty() {
		t.Fatalf("truth differs from itself:\n%s", d)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestTruthFindings(t *testing.T) {
	for _, rounds := range []int{1, 2, 3, 5} {
		cfg := DefaultConfig()
		cfg.Rounds = rounds
		truth := newGen(t, cfg).Truth()
		for _, f := range truth.Findings {
			if f.FromFleetCore() {
				continue // TestFleetCore
			}
			wantRetry, wantStatus, wantPosture := rounds-1, string(contract.StatusOpen), ""
			switch f.Kind {
			case "cert_mismatch": // one heartbeat a round, the first opens
				wantPosture = "quarantine"
			case "cloned_identity": // two hosts a round; the second host's first opens
				wantRetry, wantPosture = 2*rounds-2, "quarantine"
			case "missing":
				wantPosture = "block_admission" // each scan after the opening one confirms
			case "stale_resolved":
				wantRetry, wantPosture = 0, "retry"
				if rounds > 1 {
					wantStatus = string(contract.StatusResolved)
				}
			case "stale_state", "stale_version":
				wantPosture = "retry"
				if rounds >= 3 {
					wantPosture = "operator_review"
				}
			case "quota":
				wantPosture = "block_admission"
			default:
				wantPosture = "quarantine"
			}
			if f.RetryCount != wantRetry || f.Status != wantStatus || f.Posture != wantPosture {
				t.Fatalf("rounds %d: %+v: want retry %d status %s posture %s", rounds, f, wantRetry, wantStatus, wantPosture)
			}
			if !strings.HasPrefix(f.EvidenceID, f.Classification+":"+f.Provider+"/") {
				t.Fatalf("evidence_id %q", f.EvidenceID)
			}
		}
	}
}

func TestCompareDiff(t *testing.T) {
	truth := newGen(t, DefaultConfig()).Truth()
	truth.Findings = slices.DeleteFunc(truth.Findings, Finding.FromFleetCore) // their retry_count is not compared
	got := slices.Clone(truth.Findings[1:])
	got[0].RetryCount += 1
	got = append(got, Finding{EvidenceID: "orphan_provider_resource:maas/nope", Classification: string(contract.ClassOrphan)})
	d := truth.Compare(got, CompareOptions{})
	if len(d.Missing) != 1 || len(d.Unexpected) != 1 || len(d.Mismatched) != 1 || d.Mismatched[0].Field != "retry_count" {
		t.Fatalf("diff:\n%s", d)
	}
	if s := d.String(); !strings.Contains(s, truth.Findings[0].EvidenceID) || !strings.Contains(s, "maas/nope") {
		t.Fatalf("diff text lacks ids:\n%s", s)
	}
	if d := truth.Compare(got[1:len(got)-1], CompareOptions{IgnoreRetryCount: true}); len(d.Mismatched) != 0 {
		t.Fatalf("IgnoreRetryCount: %s", d)
	}
}

func TestNodeTruth(t *testing.T) {
	g := newGen(t, DefaultConfig())
	evs := decodeAll(t, collect(t, g))
	truth := g.Truth()
	type nodeSeen struct {
		beats  int
		hosts  map[string]bool
		agent  string
		certOK bool
		health string
		replay bool
	}
	recs := map[string]*contract.PlatformRecord{}
	seen := map[string]*nodeSeen{}
	for _, d := range evs {
		if d.Redelivery {
			continue
		}
		switch p := d.payload.(type) {
		case *contract.PlatformRecord:
			if p.Provider == contract.ProviderMAAS {
				recs[p.ProviderID] = p
			}
		case *contract.Heartbeat:
			s := seen[p.NodeID]
			if s == nil {
				s = &nodeSeen{hosts: map[string]bool{}, certOK: true}
				seen[p.NodeID] = s
			}
			s.beats++
			s.hosts[p.HostFingerprint] = true
			s.agent = p.AgentVersion
			s.certOK = s.certOK && p.CertIssuerFingerprint == recs[p.NodeID].CertIssuerFingerprint
			s.health = p.Health
			s.replay = p.ReplayRequired
		}
	}
	roles := map[string]Role{}
	for i, r := range g.roles {
		roles[g.nodeID(i)] = r
	}
	byID := map[string]NodeFinding{}
	for _, n := range truth.Nodes.Nodes {
		byID[n.NodeID] = n
	}
	for id, s := range seen {
		n, bad := byID[id]
		if !bad && roles[id] != RoleNone {
			continue // scripted by the fleet core: TestFleetCore
		}
		if !bad {
			if s.beats != g.cfg.Rounds || len(s.hosts) != 1 || s.agent != recs[id].ExpectedAgentVersion || !s.certOK || s.health != "OK" || s.replay {
				t.Fatalf("healthy node %s: %+v", id, s)
			}
			continue
		}
		if s.beats != n.Heartbeats || len(s.hosts) != n.HostFingerprints || s.agent != n.ObservedAgentVersion {
			t.Fatalf("node %s (%s): saw %+v, truth %+v", id, n.Kind, s, n)
		}
		switch n.Kind {
		case "cert_mismatch":
			if s.certOK {
				t.Fatalf("node %s: cert matches", id)
			}
		case "degraded":
			if s.health != "DEGRADED" {
				t.Fatalf("node %s: health %s", id, s.health)
			}
		case "replaying":
			if !s.replay {
				t.Fatalf("node %s: not replaying", id)
			}
		}
	}
	if len(seen) != sum(truth.Nodes.Counts) {
		t.Fatalf("%d nodes heartbeat, truth has %d", len(seen), sum(truth.Nodes.Counts))
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func TestUsageTruth(t *testing.T) {
	cfg := DefaultConfig()
	cfg.UsagePerResource = 2
	cfg.DuplicateUsageRate, cfg.UnknownUnitRate, cfg.ConflictingUsageRate = 0.02, 0.02, 0.02
	g := newGen(t, cfg)
	evs := decodeAll(t, collect(t, g))
	truth := g.Truth().Usage
	book := map[string]bool{}
	for _, u := range DefaultPriceBook().Units {
		book[u.UnitID] = u.Lifecycle == "active"
	}
	totals := map[string]*big.Rat{}
	keys := map[string]string{}    // metering key -> first usage_id
	first := map[string]*big.Rat{} // usage_id -> its first quantity
	conflicts := map[string]string{}
	dups, unknown, n := 0, 0, 0
	for _, d := range evs {
		u, ok := d.payload.(*contract.Usage)
		if !ok || d.Redelivery {
			continue
		}
		n++
		k := contract.KeyOf(u)
		q, _ := new(big.Rat).SetString(u.Quantity)
		if id, seen := keys[k]; seen && id == u.UsageID {
			// The same usage_id again: a corrected copy, half a unit more.
			if d := new(big.Rat).Sub(q, first[u.UsageID]); d.FloatString(6) != "0.500000" {
				t.Fatalf("%s again with quantity %s", u.UsageID, u.Quantity)
			}
			conflicts[u.UsageID] = u.Quantity
			continue
		} else if seen {
			dups++
			continue
		}
		first[u.UsageID] = q
		keys[k] = u.UsageID
		if !book[u.UnitID] {
			unknown++
			continue
		}
		tk := u.TenantID + "|" + u.UnitID
		if totals[tk] == nil {
			totals[tk] = new(big.Rat)
		}
		totals[tk].Add(totals[tk], q)
	}
	if n != truth.Events {
		t.Fatalf("%d usage events, truth says %d", n, truth.Events)
	}
	if len(totals) != len(truth.Totals) {
		t.Fatalf("%d totals, truth has %d", len(totals), len(truth.Totals))
	}
	for _, tt := range truth.Totals {
		got := totals[tt.TenantID+"|"+tt.UnitID]
		if got == nil || got.FloatString(6) != tt.Quantity {
			t.Fatalf("total %s %s: events sum to %v, truth says %s", tt.TenantID, tt.UnitID, got, tt.Quantity)
		}
	}
	kinds := map[string]int{}
	for _, a := range truth.Anomalies {
		kinds[a.Kind]++
	}
	if kinds["duplicate_usage"] != dups || kinds["unknown_unit"] != unknown {
		t.Fatalf("anomalies %v, events show %d duplicates and %d unknown units", kinds, dups, unknown)
	}
	if dups != g.usageDup || unknown != g.usageUnknown || dups == 0 || unknown == 0 {
		t.Fatalf("%d duplicates and %d unknown units, planned %d and %d", dups, unknown, g.usageDup, g.usageUnknown)
	}
	if len(conflicts) != g.usageConflict || kinds["conflicting_usage"] != len(conflicts) || len(conflicts) == 0 {
		t.Fatalf("%d corrected usage_ids, %d conflicting_usage anomalies, planned %d", len(conflicts), kinds["conflicting_usage"], g.usageConflict)
	}
	for _, a := range truth.Anomalies {
		if a.Kind == "conflicting_usage" && conflicts[a.UsageID] != a.ConflictQuantity {
			t.Fatalf("anomaly %+v, the stream's corrected quantity %q", a, conflicts[a.UsageID])
		}
	}
}

func TestPriceBookJSON(t *testing.T) {
	raw, err := DefaultPriceBook().JSON()
	if err != nil {
		t.Fatal(err)
	}
	var pb struct {
		Units []map[string]any `json:"units"`
	}
	if err := json.Unmarshal(raw, &pb); err != nil {
		t.Fatal(err)
	}
	for _, u := range pb.Units {
		for _, f := range []string{"unit_id", "version", "precision", "unit_price", "currency", "rating_category", "lifecycle"} {
			if _, ok := u[f]; !ok {
				t.Fatalf("unit %v lacks %s", u, f)
			}
		}
		if !contract.IsDecimal(u["unit_price"].(string)) {
			t.Fatalf("unit_price %v", u["unit_price"])
		}
	}
}

func TestValidateRejects(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"short scan":     func(c *Config) { c.ScanDuration = time.Minute },
		"long interval":  func(c *Config) { c.RoundInterval = 15 * time.Minute },
		"bad rate":       func(c *Config) { c.Drift.Missing = 1.5 },
		"too many kinds": func(c *Config) { c.Drift.Missing, c.Drift.StaleState = 0.6, 0.6 },
		"no rounds":      func(c *Config) { c.Rounds = 0 },
	} {
		cfg := DefaultConfig()
		mut(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted the config", name)
		}
	}
}

func BenchmarkGenerate(b *testing.B) {
	cfg := DefaultConfig()
	cfg.NodesPerDomain, cfg.AppsPerDomain, cfg.VolumesPerDomain, cfg.EndpointsPerDomain = 1000, 2000, 1500, 500
	g := newGen(b, cfg)
	var events, bytesOut int64
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		events, bytesOut = 0, 0
		if err := g.Emit(func(e *Event) error { events++; bytesOut += int64(len(e.Line)); return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(events), "events/op")
	b.SetBytes(bytesOut)
}
