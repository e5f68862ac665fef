package reader

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/driftline/driftline/internal/testenv"
)

// TestGroupsByKeysMatchFinal counts the heat map under a tag both ways,
// from the matching ids' current rows and with FINAL (the bound set to
// 0), over findings whose newer versions, unmerged, lost the tag, changed
// status or moved to another domain.
func TestGroupsByKeysMatchFinal(t *testing.T) {
	conn, _ := testenv.ClickHouseConn(t)
	ctx := context.Background()
	insert := `INSERT INTO drift_evidence (evidence_id, owning_domain, classification, severity, status, posture,
		first_seen_at, last_seen_at, tags, version, updated_at)
		SELECT concat('orphan_provider_resource:maas/n', toString(number)), %s, 'orphan_provider_resource', 'warning', %s,
			'quarantine', toDateTime(1795000000), toDateTime(1795000000), %s, %d, toDateTime(1795000000)
		FROM numbers(5000) WHERE %s`
	for _, stmt := range []string{
		fmt.Sprintf(insert, "concat('d', toString(number % 4))", "'open'", "if(number % 3 = 0, ['gpu'], emptyArrayString())", 1, "1"),
		fmt.Sprintf(insert, "concat('d', toString(number % 5))", "if(number % 7 = 0, 'resolved', 'open')",
			"if(number % 6 = 0, ['gpu'], emptyArrayString())", 2, "number % 2 = 0"),
	} {
		if err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	rd := New(conn, Options{})
	count := func(f Filter) []string {
		t.Helper()
		groups, err := rd.groups(ctx, "heatmap", f)
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
