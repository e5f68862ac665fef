package api_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/access"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
)

// fakeRead answers the heat map from fixed groups; any other read panics
// on the nil ReadModel it embeds.
type fakeRead struct {
	api.ReadModel
	groups []reader.FindingGroup
	got    reader.Filter
}

func (f *fakeRead) Heatmap(_ context.Context, flt reader.Filter) ([]reader.FindingGroup, error) {
	f.got = flt
	return f.groups, nil
}

// TestHeatmapOverAFakeReadModel checks the handler's side of the heat map
// (parameters in, fold out) without ClickHouse.
func TestHeatmapOverAFakeReadModel(t *testing.T) {
	fr := &fakeRead{groups: []reader.FindingGroup{
		{OwningDomain: "compute", Classification: string(contract.ClassIdentity), Severity: string(contract.SeverityWarning), Status: string(contract.StatusOpen), Count: 3},
		{OwningDomain: "compute", Classification: string(contract.ClassIdentity), Severity: string(contract.SeverityCritical), Status: string(contract.StatusOpen), Count: 2},
		{OwningDomain: "apps", Classification: "a_new_class", Severity: string(contract.SeverityWarning), Status: string(contract.StatusOpen), Count: 1},
	}}
	aud, err := access.NewAuditor(&access.MemorySink{}, access.AuditorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(aud.Close)
	hs := serveAPI(t, api.Options{Guard: testenv.LocalGuard(t), Auditor: aud, ReadModel: fr, Now: func() time.Time { return t0 }})
	h := decode[apitypes.Heatmap](t, testenv.GetJSON(t, hs+"/v1/heatmap?owning_domain=compute,apps&age=1h", 200))
	if !slices.Equal(fr.got.OwningDomains, []string{"compute", "apps"}) || !fr.got.FirstSeenBy.Equal(t0.Add(-time.Hour)) ||
		fr.got.Status != string(contract.StatusOpen) {
		t.Errorf("filter passed to the read model: %+v", fr.got)
	}
	want := []apitypes.HeatCell{
		{OwningDomain: "apps", Classification: "a_new_class", Count: 1, MaxSeverity: string(contract.SeverityWarning)},
		{OwningDomain: "compute", Classification: string(contract.ClassIdentity), Count: 5, Critical: 2, MaxSeverity: string(contract.SeverityCritical)},
	}
	if !slices.Equal(h.Domains, []string{"apps", "compute"}) || !slices.Equal(h.Cells, want) ||
		!slices.Equal(h.Classifications, append(slices.Clone(apitypes.Classifications), "a_new_class")) {
		t.Errorf("heat map %+v", h)
	}
}
