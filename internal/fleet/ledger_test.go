package fleet

import (
	"bytes"
	"testing"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/decimal"
)

func TestLedgerOffKeepsTheStream(t *testing.T) {
	cfg := DefaultConfig()
	off := digest(t, newGen(t, cfg))
	cfg.Ledger.Enabled = true
	on := newGen(t, cfg)
	if digest(t, on) == off {
		t.Fatal("the ledger simulation emitted nothing")
	}
	// Drift and node truth do not depend on the ledger.
	cfg.Ledger.Enabled = false
	a, b := newGen(t, cfg).Truth(), on.Truth()
	if len(a.Findings) != len(b.Findings) || len(a.Nodes.Statuses) != len(b.Nodes.Statuses) {
		t.Fatal("the ledger changed the drift truth")
	}
}

func TestLedgerTruth(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Ledger.Enabled = true
	cfg.Ledger.MissingRate, cfg.Ledger.WrongAmountRate = 0.05, 0.05
	g := newGen(t, cfg)
	evs := decodeAll(t, collect(t, g))
	truth := g.Truth().Usage
	prices := map[string]Unit{}
	for _, u := range DefaultPriceBook().Units {
		prices[u.UnitID] = u
	}
	usage := map[string]*contract.Usage{}
	keys := map[string]bool{}
	var rated []string // usage_ids a correct rater rates, in order
	posted := map[string]*contract.LedgerEntry{}
	last := map[string]int{} // usage_id -> round
	for _, d := range evs {
		if d.Redelivery {
			continue
		}
		switch p := d.payload.(type) {
		case *contract.Usage:
			k := contract.KeyOf(p)
			if keys[k] {
				continue
			}
			keys[k] = true
			if prices[p.UnitID].Lifecycle != "active" {
				continue
			}
			usage[p.UsageID] = p
			last[p.UsageID] = d.Round
			rated = append(rated, p.UsageID)
		case *contract.LedgerEntry:
			if posted[p.UsageID] != nil {
				t.Fatalf("two entries for %s", p.UsageID)
			}
			u := usage[p.UsageID]
			if u == nil {
				t.Fatalf("entry for usage %s that is not rated", p.UsageID)
			}
			if contract.KeyOf(p) != contract.KeyOf(u) || !bytes.Equal(d.Key, []byte(contract.KeyOf(u))) {
				t.Fatalf("entry key %s, usage key %s", d.Key, contract.KeyOf(u))
			}
			if !p.PostedAt.Equal(d.env.OccurredAt) || p.PostedAt.Before(u.WindowEnd.Add(cfg.Ledger.Delay)) {
				t.Fatalf("posted_at %s differs from occurred_at %s", p.PostedAt, d.env.OccurredAt)
			}
			posted[p.UsageID] = p
		}
	}
	want := map[string]UsageAnomaly{}
	for _, a := range truth.Anomalies {
		if a.Kind == "rated_not_ledgered" || a.Kind == "amount_mismatch" {
			want[a.UsageID] = a
		}
	}
	missing, wrong := 0, 0
	for _, id := range rated {
		u := usage[id]
		unit := prices[u.UnitID]
		amount, err := decimal.MulRound(decimal.MustParse(u.Quantity), decimal.MustParse(unit.UnitPrice), unit.Precision)
		if err != nil {
			t.Fatal(err)
		}
		a, anomalous := want[id]
		l := posted[id]
		switch {
		case l == nil:
			missing++
			if !anomalous || a.Kind != "rated_not_ledgered" || a.RatedAmount != amount.String() {
				t.Fatalf("%s has no entry; truth %+v", id, a)
			}
			if !g.ledgerDueRound(last[id]) {
				t.Fatalf("%s: missing entry in round %d, whose grace does not pass", id, last[id])
			}
		case l.Amount != amount.String():
			wrong++
			if !anomalous || a.Kind != "amount_mismatch" || a.LedgerAmount != l.Amount || a.RatedAmount != amount.String() {
				t.Fatalf("%s posted %s, rated %s; truth %+v", id, l.Amount, amount, a)
			}
		case anomalous:
			t.Fatalf("%s posted correctly; truth %+v", id, a)
		}
	}
	if missing == 0 || wrong == 0 || missing+wrong != len(want) || truth.Ledgered != len(posted) {
		t.Fatalf("missing %d wrong %d, truth %d anomalies and %d ledgered (%d posted)", missing, wrong, len(want), truth.Ledgered, len(posted))
	}
}

func TestValidateLedger(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Ledger.Enabled = true
	cfg.Ledger.Delay = cfg.Ledger.LedgerGrace
	if _, err := New(cfg); err == nil {
		t.Fatal("a ledger delay past the grace was accepted")
	}
}
