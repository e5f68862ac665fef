package fleet

import (
	"fmt"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// This file replays the generated stream through a small reference
// implementation of docs/drift-model.md, with the events spread over
// partitions as Kafka would spread them, and checks that the findings are
// exactly the generator's Truth.

var (
	liveStates   = map[string]bool{"active": true, "running": true, "allocated": true, "ready": true, "attached": true, "serving": true}
	absentStates = map[string]bool{"released": true, "deleted": true, "decommissioned": true, "retired": true}
)

type refFinding struct {
	open    bool
	retry   int
	posture string
}

type refIdentity struct {
	provider, providerID string
	rec                  *contract.PlatformRecord
	recAt                time.Time
	obs                  *contract.Observation
	obsAt                time.Time
	orphanSince          time.Time
	disagreements        int
	missingByScan        bool
	findings             map[string]*refFinding
}

type refPartition struct {
	maxTime time.Time
	seen    map[string]bool // dedupe identities
	ids     map[string]*refIdentity
}

type refModel struct {
	t     *testing.T
	w     Windows
	parts []*refPartition
}

func (m *refModel) identity(p *refPartition, provider, id string) *refIdentity {
	k := contract.IdentityKey(provider, id)
	st := p.ids[k]
	if st == nil {
		st = &refIdentity{provider: provider, providerID: id, findings: map[string]*refFinding{}}
		p.ids[k] = st
	}
	return st
}

func (m *refModel) apply(d decoded) {
	if _, ok := d.payload.(*contract.Usage); ok {
		return // not joined
	}
	if _, ok := d.payload.(*contract.ScanCompleted); ok {
		for _, p := range m.parts {
			m.applyTo(p, d)
		}
		return
	}
	m.applyTo(m.parts[contract.Partition(d.Key, int32(len(m.parts)))], d)
}

func (m *refModel) applyTo(p *refPartition, d decoded) {
	dk := fmt.Sprintf("%s\x00%d", d.env.Producer, d.env.Seq)
	if p.seen[dk] {
		return
	}
	p.seen[dk] = true
	prevW := p.maxTime.Add(-m.w.AllowedLateness)
	if d.OccurredAt.After(p.maxTime) {
		p.maxTime = d.OccurredAt
	}
	w := p.maxTime.Add(-m.w.AllowedLateness)
	var own *refIdentity
	ownObs := false
	scanProvider := "" // provider whose scan completed: it confirms open missing findings
	switch pl := d.payload.(type) {
	case *contract.PlatformRecord:
		st := m.identity(p, pl.Provider, pl.ProviderID)
		if st.rec == nil || pl.RecordVersion > st.rec.RecordVersion {
			st.rec, st.recAt = pl, d.OccurredAt
			if m.owned(st) {
				st.orphanSince = time.Time{}
			}
		}
		own = st
	case *contract.Observation:
		st := m.identity(p, pl.Provider, pl.ProviderID)
		if st.obs == nil || d.OccurredAt.After(st.obsAt) {
			st.obs, st.obsAt = pl, d.OccurredAt
			st.missingByScan = false
			if !m.owned(st) && liveStates[pl.ObservedState] {
				if st.orphanSince.IsZero() {
					st.orphanSince = d.OccurredAt
				}
			} else {
				st.orphanSince = time.Time{}
			}
			if m.owned(st) && m.disagrees(st) {
				st.disagreements++
			} else {
				st.disagreements = 0
			}
			ownObs = true
		}
		own = st
	case *contract.ScanCompleted:
		scanProvider = pl.Provider
		for _, st := range p.ids {
			if st.provider == pl.Provider && st.rec != nil && st.recAt.Before(pl.ScanStartedAt) &&
				(st.obs == nil || st.obsAt.Before(pl.ScanStartedAt)) {
				st.missingByScan = true
			}
		}
	}
	if own != nil && !w.After(prevW) {
		m.evaluate(own, w, prevW, ownObs, false)
		return
	}
	for _, st := range p.ids {
		m.evaluate(st, w, prevW, ownObs && st == own, scanProvider != "" && st.provider == scanProvider)
	}
}

func (m *refModel) owned(st *refIdentity) bool {
	return st.rec != nil && !st.rec.Deleted && !absentStates[st.rec.ExpectedState]
}

func (m *refModel) disagrees(st *refIdentity) bool {
	return st.obs.ObservedState != st.rec.ExpectedState ||
		(st.rec.ExpectedVersion != "" && st.obs.ObservedVersion != st.rec.ExpectedVersion)
}

func greater(a, b string) bool {
	x, _ := new(big.Rat).SetString(a)
	y, _ := new(big.Rat).SetString(b)
	return x.Cmp(y) > 0
}

func (m *refModel) conditions(st *refIdentity, w time.Time) map[string]bool {
	owned := m.owned(st)
	c := map[string]bool{}
	if owned && liveStates[st.rec.ExpectedState] {
		last := st.recAt
		if st.obs != nil {
			last = st.obsAt
		}
		c[string(contract.ClassMissing)] = st.missingByScan || !w.Before(last.Add(m.w.Staleness))
	}
	if st.obs != nil && liveStates[st.obs.ObservedState] && !owned && !st.orphanSince.IsZero() {
		c[string(contract.ClassOrphan)] = !w.Before(st.orphanSince.Add(m.w.OrphanGrace))
	}
	if owned && st.obs != nil {
		c[string(contract.ClassStale)] = m.disagrees(st)
		c[string(contract.ClassQuota)] = st.rec.Quota != "" && st.obs.Usage != "" && greater(st.obs.Usage, st.rec.Quota)
		c[string(contract.ClassRoute)] = st.rec.RouteTarget != "" && st.obs.RouteTarget != "" && st.rec.RouteTarget != st.obs.RouteTarget
		c[string(contract.ClassIdentity)] = st.obs.OwnerRef != "" && st.obs.OwnerRef != st.rec.RecordID
	}
	return c
}

func (m *refModel) evaluate(st *refIdentity, w, prevW time.Time, ownObs, scanned bool) {
	now := m.conditions(st, w)
	for _, class := range []string{string(contract.ClassMissing), string(contract.ClassOrphan), string(contract.ClassStale), string(contract.ClassQuota), string(contract.ClassRoute), string(contract.ClassIdentity)} {
		f := st.findings[class]
		switch {
		case now[class] && (f == nil || !f.open):
			if ownObs && (class == string(contract.ClassOrphan) || class == string(contract.ClassMissing)) && !m.conditions(st, prevW)[class] {
				m.t.Errorf("%s/%s: %s opened by a watermark move of the identity's own observation: retry_count would be ambiguous", st.provider, st.providerID, class)
			}
			if f == nil {
				f = &refFinding{}
				st.findings[class] = f
			}
			f.open, f.retry = true, 0
		case now[class] && class != string(contract.ClassMissing) && ownObs, now[class] && class == string(contract.ClassMissing) && scanned:
			f.retry++ // a new observation confirms; for missing, a later scan that again does not see it
		case !now[class] && f != nil && f.open:
			f.open = false
		}
		if class == string(contract.ClassStale) && f != nil && f.open {
			f.posture = "retry"
			if st.disagreements >= m.w.ReviewAfter {
				f.posture = "operator_review"
			}
		}
	}
}

func (m *refModel) findings() []Finding {
	var out []Finding
	for _, p := range m.parts {
		for _, st := range p.ids {
			for class, f := range st.findings {
				sev, posture := severityPosture(class, f.posture)
				status := string(contract.StatusResolved)
				if f.open {
					status = string(contract.StatusOpen)
				}
				out = append(out, Finding{EvidenceID: class + ":" + contract.IdentityKey(st.provider, st.providerID),
					Classification: class, Severity: sev, Provider: st.provider, ProviderID: st.providerID,
					Status: status, RetryCount: f.retry, Posture: posture})
			}
		}
	}
	return out
}

func TestReferenceJoinerMatchesTruth(t *testing.T) {
	for _, tc := range []struct {
		seed   int64
		rounds int
		parts  int
	}{{1, 3, 6}, {2, 3, 1}, {3, 1, 3}, {4, 2, 16}, {5, 4, 6}, {6, 3, 64}} {
		t.Run(fmt.Sprintf("seed%d_rounds%d_parts%d", tc.seed, tc.rounds, tc.parts), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Seed, cfg.Rounds = tc.seed, tc.rounds
			cfg.DuplicateRate = 0.05
			g := newGen(t, cfg)
			m := &refModel{t: t, w: cfg.Windows}
			for range tc.parts {
				m.parts = append(m.parts, &refPartition{seen: map[string]bool{}, ids: map[string]*refIdentity{}})
			}
			for _, d := range decodeAll(t, collect(t, g)) {
				m.apply(d)
			}
			got := m.findings()
			slices.SortFunc(got, func(a, b Finding) int { return compareStrings(a.EvidenceID, b.EvidenceID) })
			// The reference joiner models records and observations only;
			// node-agent findings are checked by pipeline/joiner/nodeagent.
			truth := g.Truth()
			truth.Findings = slices.DeleteFunc(truth.Findings, Finding.FromNodeAgent)
			if d := truth.Compare(got, CompareOptions{}); !d.Empty() {
				t.Fatalf("reference joiner disagrees with Truth:\n%s", d)
			}
		})
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
