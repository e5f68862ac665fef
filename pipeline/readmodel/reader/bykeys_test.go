package reader

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api/apitypes"
)

// churned returns a reader over findings whose newer versions, unmerged,
// lost their tag, changed status, score and last-seen time, or moved to
// another domain.
func churned(t *testing.T) *Reader {
	t.Helper()
	conn, _ := testenv.ClickHouseConn(t)
	insert := `INSERT INTO drift_evidence (evidence_id, owning_domain, classification, severity, status, posture,
		first_seen_at, last_seen_at, attention_score, tags, version, updated_at)
		SELECT concat('orphan_provider_resource:maas/n', toString(number)), %s, 'orphan_provider_resource', 'warning', %s,
			'quarantine', toDateTime(1795000000), toDateTime(1795000000 + %s), toFloat64(%s), %s, %d, toDateTime(1795000000)
		FROM numbers(2000) WHERE %s`
	for _, stmt := range []string{
		fmt.Sprintf(insert, "concat('d', toString(number % 4))", "'open'", "number % 13", "number % 97",
			"if(number % 3 = 0, ['gpu'], emptyArrayString())", 1, "1"),
		fmt.Sprintf(insert, "concat('d', toString(number % 5))", "if(number % 7 = 0, 'resolved', 'open')", "100 + number % 11",
			"number % 89", "if(number % 6 = 0, ['gpu'], emptyArrayString())", 2, "number % 2 = 0"),
	} {
		if err := conn.Exec(context.Background(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	return New(conn, Options{})
}

// TestGroupsByKeysMatchFinal counts the heat map under a filter both
// ways: from the matching ids' current rows, and with FINAL (the bound
// set to 0).
func TestGroupsByKeysMatchFinal(t *testing.T) {
	rd := churned(t)
	count := func(f Filter) []string {
		t.Helper()
		groups, err := rd.groups(context.Background(), "heatmap", f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, g := range groups {
			out = append(out, fmt.Sprintf("%s %s %s %s %s %d", g.OwningDomain, g.Classification, g.Severity, g.Status, g.Posture, g.Count))
		}
		slices.Sort(out)
		return out
	}
	for _, f := range []Filter{{Tags: []string{"gpu"}}, {Tags: []string{"gpu"}, Status: "open"}, {OwningDomains: []string{"d1", "d4"}}} {
		byKeys := count(f)
		bound := groupKeysBound
		groupKeysBound = 0
		final := count(f)
		groupKeysBound = bound
		if len(final) < 2 || !slices.Equal(byKeys, final) {
			t.Errorf("%+v: by keys %v, with FINAL %v", f, byKeys, final)
		}
	}
}

// TestEachFindingByKeysMatchFinal exports findings both ways, as ranked
// pages of 97 rows and with FINAL (no ranked pages), in every order,
// from a cursor and up to a limit.
func TestEachFindingByKeysMatchFinal(t *testing.T) {
	rd := churned(t)
	export := func(f Filter, s Sort, after *Keyset, limit int) []string {
		t.Helper()
		var out []string
		err := rd.EachFinding(context.Background(), f, s, after, limit, func(f apitypes.Finding) error {
			out = append(out, f.EvidenceID)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	chunk, ranked := eachChunk, eachRankedMax
	eachChunk = 97
	defer func() { eachChunk, eachRankedMax = chunk, ranked }()
	for _, s := range DriftSorts {
		for _, c := range []struct {
			f     Filter
			limit int
		}{
			{Filter{Tags: []string{"gpu"}}, 0},
			{Filter{Status: "open", OwningDomains: []string{"d1", "d4"}}, 0},
			{Filter{}, 100},
		} {
			first := export(c.f, s, nil, 3)
			if len(first) != 3 {
				t.Fatalf("%s %+v: %d rows for a limit of 3", s.Name, c.f, len(first))
			}
			var after *Keyset
			if s.ByKey() {
				after = &Keyset{Sort: s.Name, ID: first[2]}
			} else {
				fs, err := rd.currentFindings(context.Background(), "t", nil, nil, first[2:])
				if err != nil || len(fs) != 1 {
					t.Fatal(err, len(fs))
				}
				k := s.FindingKey(fs[0])
				after = &k
			}
			for _, from := range []*Keyset{nil, after} {
				eachRankedMax = func(uint64) uint64 { return math.MaxUint64 }
				byKeys := export(c.f, s, from, c.limit)
				eachRankedMax = func(uint64) uint64 { return 0 }
				final := export(c.f, s, from, c.limit)
				if len(final) < 20 || !slices.Equal(byKeys, final) {
					t.Errorf("%s %+v from %v limit %d: %d rows by keys, %d with FINAL", s.Name, c.f, from, c.limit, len(byKeys), len(final))
				}
			}
		}
	}
}
