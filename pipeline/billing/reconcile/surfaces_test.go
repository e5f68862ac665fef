package reconcile

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	json "github.com/segmentio/encoding/json"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api"
	"github.com/driftline/driftline/pipeline/api/apitypes"
	"github.com/driftline/driftline/pipeline/contract"
)

// TestStatusAndAutomationThroughTheAPI runs the reconciler into ClickHouse
// and reads the conservation section of /v1/status and the automation flag
// of /v1/billing/automation through the query API.
func TestStatusAndAutomationThroughTheAPI(t *testing.T) {
	f := newFixture(t)
	stop := f.start("billing-surfaces")
	defer stop()
	srv, err := api.New(api.Options{Guard: testenv.LocalGuard(t), DB: f.ch, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	// t-1: ok agrees, wrong is posted one cent more, ghost is rated with
	// no usage behind it. t-2: ok2 agrees. A posting for usage nobody
	// reported (stray) names no tenant.
	f.usage("ok", "m-ok", "gpu_hour", t0)
	f.rated("ok", "m-ok", "4.90", t0)
	f.ledger("ok", "m-ok", "4.9", t0.Add(time.Minute))
	f.usage("wrong", "m-wrong", "gpu_hour", t0)
	f.rated("wrong", "m-wrong", "4.90", t0)
	f.ledger("wrong", "m-wrong", "4.91", t0.Add(time.Minute))
	f.rated("ghost", "m-ghost", "2.45", t0)
	// usageOfT2 sends usage of t-2 and its rated line.
	usageOfT2 := func(id, meter, amount string) {
		u := usage(id, meter, "gpu_hour")
		u.TenantID, u.WindowStart, u.WindowEnd = "t-2", t0.Add(-time.Minute), t0
		f.send(contract.TypeUsageRecorded, "gpu-meter", t0, u)
		r := rated(id, meter, amount)
		r.TenantID, r.RatedAt = "t-2", t0
		f.send(contract.TypeBillingRated, "rater", t0, r)
	}
	usageOfT2("ok2", "m-ok2", "4.90")
	f.ledger("ok2", "m-ok2", "4.90", t0.Add(time.Minute))
	f.ledger("stray", "m-stray", "1.00", t0.Add(time.Minute))
	// Event time moves past every grace on every partition.
	for p := int32(0); p < 3; p++ {
		f.tickPartition(p, t0.Add(20*time.Minute))
	}

	status := func() apitypes.BillingConservation { return get[apitypes.Status](t, hs.URL+"/v1/status").Billing }
	automation := func(q string) apitypes.Automation {
		return get[apitypes.Automation](t, hs.URL+"/v1/billing/automation?"+q)
	}
	tenant := func(b apitypes.BillingConservation, id string) apitypes.TenantConservation {
		for _, tc := range b.Tenants {
			if tc.TenantID == id {
				return tc
			}
		}
		t.Fatalf("no tenant %q in %+v", id, b.Tenants)
		return apitypes.TenantConservation{}
	}

	testenv.CheckFor(t, 30*time.Second, func() error {
		b := status()
		if b.Error != "" {
			t.Fatalf("billing section: %s", b.Error)
		}
		if b.WindowsUnbalanced != 2 {
			return fmt.Errorf("windows_unbalanced %d, want 2 (ghost's and stray's): %+v", b.WindowsUnbalanced, b)
		}
		// The windows can be unbalanced as wanted before every tick is
		// counted: wait for the ticks too.
		for _, tc := range b.Tenants {
			if tc.TenantID != "t-1" {
				continue
			}
			if tc.Accepted != 2+uint64(f.extra) || tc.Ledgered != 1+uint64(f.extra) {
				return fmt.Errorf("t-1 accepted %d, ledgered %d, want %d and %d", tc.Accepted, tc.Ledgered, 2+f.extra, 1+f.extra)
			}
			return nil
		}
		return fmt.Errorf("no tenant t-1 yet: %+v", b.Tenants)
	})
	b := status()
	t1 := tenant(b, "t-1")
	extra := uint64(f.extra) // the ticks: tenant t-1, balanced, in the 10:00 hour
	if t1.Accepted != 2+extra || t1.Rated != 3+extra || t1.RatedWithoutUsage != 1 || t1.RatedWithoutUsageAmount != "2.45" ||
		t1.Ledgered != 1+extra || t1.AmountMismatch != 1 || t1.AmountMismatchAmount != "4.90" || t1.NotLedgered != 1 ||
		t1.NotLedgeredAmount != "2.45" || t1.Unexplained != 1 || t1.WindowsUnbalanced != 1 || t1.Windows != 1 || !t1.Conserved {
		t.Fatalf("t-1 %+v", t1)
	}
	// 4.90 × (3 + ticks) exactly, ghost's 2.45 on top.
	if want := map[uint64]string{1: "17.15", 2: "22.05", 3: "26.95"}[extra]; t1.RatedAmount != want {
		t.Fatalf("t-1 rated %s, want %s (%d ticks)", t1.RatedAmount, want, extra)
	}
	if t2 := tenant(b, "t-2"); t2.Accepted != 1 || t2.Ledgered != 1 || t2.LedgeredAmount != "4.90" || t2.WindowsUnbalanced != 0 || !t2.Conserved {
		t.Fatalf("t-2 %+v", t2)
	}
	if stray := tenant(b, ""); stray.LedgerWithoutRated != 1 || stray.LedgerWithoutRatedAmount != "1.00" || stray.WindowsUnbalanced != 1 {
		t.Fatalf("unattributed %+v", stray)
	}
	if b.Balanced || len(b.Unbalanced) != 2 {
		t.Fatalf("section %+v", b)
	}
	conservation := func(q string) apitypes.ConservationPage {
		return get[apitypes.ConservationPage](t, hs.URL+"/v1/billing/conservation?"+q)
	}
	if p := conservation("tenant_id=t-1&from=2026-11-21T10:00:00Z&to=2026-11-21T11:00:00Z"); p.Count != 1 ||
		p.Windows[0].Balanced || !p.Windows[0].Conserved || p.Windows[0].Accepted != 2+extra || !p.Windows[0].WindowStart.Equal(t0) {
		t.Fatalf("t-1 windows %+v", p)
	}
	if p := conservation("tenant_id=t-1&from=2026-11-21T11:00:00Z"); p.Count != 0 {
		t.Fatalf("t-1 windows from 11:00 %+v", p)
	}
	if p := conservation("unbalanced=true&limit=1"); p.Count != 1 || !p.Truncated || p.Windows[0].Balanced {
		t.Fatalf("unbalanced windows %+v", p)
	}
	if p := conservation(""); p.Count != 3 {
		t.Fatalf("windows %+v", p)
	}
	for _, q := range []string{"from=yesterday", "unbalanced=maybe", "limit=0", "tenant_id=", "bogus=1"} {
		testenv.GetJSON(t, hs.URL+"/v1/billing/conservation?"+q, 400)
	}

	// t-1 is stopped by its amount mismatch, ghost's window and the stray
	// posting; t-2 only by the stray posting, which could be anyone's.
	a := automation("tenant_id=t-1")
	if !a.Stopped || a.OpenMismatches != 4 || len(a.AmountAtRisk) != 1 || a.AmountAtRisk[0].Amount != "5.91" || a.AsOf == nil {
		// 0.01 (amount) + 2.45 (ghost rated) + 2.45 (ghost not ledgered) + 1.00 (stray)
		t.Fatalf("t-1 automation %+v", a)
	}
	kinds := map[string]uint64{}
	for _, r := range a.Reasons {
		kinds[r.Scope+"/"+r.Kind] = r.Open
	}
	if len(kinds) != 4 || kinds["tenant/amount_mismatch"] != 1 || kinds["tenant/window_unbalanced"] != 1 ||
		kinds["tenant/rated_not_ledgered"] != 1 || kinds["unattributed/window_unbalanced"] != 1 {
		t.Fatalf("t-1 reasons %+v", a.Reasons)
	}
	if len(a.Products) != 1 || a.Products[0].ProductID != "gpuaas" || !a.Products[0].Stopped {
		t.Fatalf("t-1 products %+v", a.Products)
	}
	if a := automation("tenant_id=t-2&product_id=gpuaas"); !a.Stopped || a.OpenMismatches != 1 {
		t.Fatalf("t-2 automation %+v", a)
	}

	// The missing usage and the stray posting's rated line and usage
	// arrive: the windows balance, t-2 runs again, t-1 stays stopped by
	// its amount mismatch (and ghost's missing posting).
	f.usage("ghost", "m-ghost", "gpu_hour", t0)
	usageOfT2("stray", "m-stray", "1.00")
	testenv.CheckFor(t, 30*time.Second, func() error {
		if a := automation("tenant_id=t-2"); a.Stopped {
			return fmt.Errorf("t-2 still stopped: %+v", a)
		}
		return nil
	})
	b = status()
	if b.WindowsUnbalanced != 0 || !b.Balanced || len(b.Unbalanced) != 0 {
		t.Fatalf("section %+v", b)
	}
	if t2 := tenant(b, "t-2"); t2.Accepted != 2 || t2.Ledgered != 2 || t2.LedgeredAmount != "5.90" {
		t.Fatalf("t-2 %+v", t2)
	}
	if a := automation("tenant_id=t-1"); !a.Stopped || a.OpenMismatches != 2 {
		t.Fatalf("t-1 automation %+v", a)
	}
	if a := automation("tenant_id=t-1&product_id=storage"); a.Stopped || a.OpenMismatches != 0 || len(a.AmountAtRisk) != 0 {
		t.Fatalf("t-1 storage automation %+v", a)
	}
	for _, q := range []string{"", "product_id=gpuaas", "tenant_id=t-1&tenant_id=t-2", "tenant_id=t-1&bogus=1"} {
		testenv.GetJSON(t, hs.URL+"/v1/billing/automation?"+q, 400)
	}
}

// get decodes the answer of a GET of url, which must be 200.
func get[T any](t *testing.T, url string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(testenv.GetJSON(t, url, 200), &v); err != nil {
		t.Fatal(err)
	}
	return v
}
