package fleet

import (
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/decimal"
)

// Ledger configures the simulated external ledger: one ledger.entry per
// usage a correct rater rates (not a duplicate usage_id, not an unknown
// or retired unit), with the exact amount of DefaultPriceBook, except for
// the injected rated_not_ledgered (no entry) and amount_mismatch (one
// smallest unit more than the rated amount).
//
// An entry's occurred_at (= posted_at) is its usage's occurred_at + Delay,
// and the entries of round r are emitted right after round r's usage.
// Delay is below LedgerGrace, so a posted entry is never late for its
// rated line (whose event time is the usage's, as the rater keeps it).
// Missing entries are injected only in rounds whose ledger grace has
// certainly passed at the end of the stream: R_r + ObservationSpread +
// LedgerGrace <= R_last + Delay - AllowedLateness, where R_last + Delay is
// the earliest posting of the last round (every billing partition that
// holds a missing entry also receives a last-round entry; with hundreds
// of metered resources per round that holds for any partition count in
// use). So the open rated_not_ledgered mismatches at the end are exactly
// Truth.Usage's, however the events are partitioned.
type Ledger struct {
	// Enabled turns the simulation on. Default false: the stream of an
	// existing config stays byte-identical; cmd/stack run turns it on.
	Enabled bool `json:"enabled"`
	// Delay is how long after its usage an entry is posted. Default 5m.
	Delay time.Duration `json:"delay"`
	// LedgerGrace is the reconciler's ledger grace the truth is computed
	// for. Default 15m (docs/billing-model.md).
	LedgerGrace time.Duration `json:"ledger_grace"`
	// MissingRate is the fraction of eligible rated usage that gets no
	// entry (rated_not_ledgered). Default 0.01.
	MissingRate float64 `json:"missing_rate"`
	// WrongAmountRate is the fraction of rated usage whose entry is one
	// smallest unit off (amount_mismatch). Default 0.005.
	WrongAmountRate float64 `json:"wrong_amount_rate"`
}

// DefaultLedger returns the default ledger simulation, disabled.
func DefaultLedger() Ledger {
	return Ledger{Delay: 5 * time.Minute, LedgerGrace: 15 * time.Minute, MissingRate: 0.01, WrongAmountRate: 0.005}
}

func (c *Config) validateLedger() error {
	l := c.Ledger
	if !l.Enabled {
		return nil
	}
	for _, r := range []namedRate{{"Ledger.MissingRate", l.MissingRate}, {"Ledger.WrongAmountRate", l.WrongAmountRate}} {
		if !(r.v >= 0 && r.v <= 1) {
			return &ConfigError{Field: r.name, Detail: "not a fraction in [0, 1]"}
		}
	}
	if l.MissingRate+l.WrongAmountRate > 1 {
		return &ConfigError{Field: "Ledger.MissingRate", Detail: "MissingRate + WrongAmountRate exceed 1"}
	}
	if l.Delay < 0 || l.Delay+c.ObservationSpread >= l.LedgerGrace {
		return &ConfigError{Field: "Ledger.Delay", Detail: "must be at least 0 and below LedgerGrace - ObservationSpread, so a posted entry is never late; Possible solutions: shorten -fleet.ledger.delay"}
	}
	return nil
}

// Ledger outcomes of one rated usage.
const (
	ledgerPosted uint8 = iota
	ledgerMissing
	ledgerWrong
)

// ledgerDueRound reports whether round r's ledger grace has certainly
// passed at the end of the stream (see Ledger).
func (g *Generator) ledgerDueRound(r int) bool {
	l := g.cfg.Ledger
	last := g.roundStart(g.cfg.Rounds - 1).Add(l.Delay - g.cfg.Windows.AllowedLateness)
	return !g.roundStart(r).Add(g.cfg.ObservationSpread + l.LedgerGrace).After(last)
}

// ledgerOutcome decides the ledger outcome of a rated usage; u is neither
// a duplicate nor of an unknown unit.
func (g *Generator) ledgerOutcome(u *usageRec) uint8 {
	l := g.cfg.Ledger
	x := float64(g.hash(tagLedger, rid(u.f, u.i), uint64(u.r)<<20|uint64(u.k))%1_000_000) / 1e6
	switch {
	case x < l.MissingRate && g.ledgerDueRound(u.r):
		return ledgerMissing
	case x >= l.MissingRate && x < l.MissingRate+l.WrongAmountRate:
		return ledgerWrong
	}
	return ledgerPosted
}

// ratedAmount returns the exact amount a correct rater computes for u, and
// the amount the ledger posts.
func (g *Generator) ledgerAmounts(u *usageRec, outcome uint8) (rated, posted decimal.Dec, currency string) {
	for _, unit := range DefaultPriceBook().Units {
		if unit.UnitID != u.unit {
			continue
		}
		amount, err := decimal.MulRound(decimal.New(u.micros, 6), decimal.MustParse(unit.UnitPrice), unit.Precision)
		if err != nil {
			panic("BUG: generated usage cannot be rated: " + err.Error())
		}
		posted = amount
		if outcome == ledgerWrong {
			if posted, err = decimal.Add(amount, decimal.New(1, unit.Precision)); err != nil {
				panic("BUG: ledger amount out of range: " + err.Error())
			}
		}
		return amount, posted, unit.Currency
	}
	panic("BUG: usage of a unit the price book does not have")
}

// ratedUsage reports whether a correct rater rates u.
func ratedUsage(u *usageRec) bool {
	return !u.duplicate && !u.corrected && u.anomaly != usageUnknownUnit
}

// ledgerProducer is the envelope producer of the simulated ledger.
const ledgerProducer = "ledger-poster"

// queueLedger remembers a usage event for the round's ledger postings.
func (e *emitter) queueLedger(u *usageRec) {
	if e.g.cfg.Ledger.Enabled && ratedUsage(u) {
		e.ledgerQ = append(e.ledgerQ, *u)
	}
}

// ledgerRound emits the ledger entries of the round's usage.
func (e *emitter) ledgerRound() error {
	g := e.g
	for i := range e.ledgerQ {
		u := &e.ledgerQ[i]
		outcome := g.ledgerOutcome(u)
		if outcome == ledgerMissing {
			continue
		}
		_, posted, currency := g.ledgerAmounts(u, outcome)
		at := u.at.Add(g.cfg.Ledger.Delay)
		e.ledgerSeq++
		e.scratch = append(e.scratch[:0], ledgerProducer...)
		e.begin(contract.TypeLedgerEntry, e.scratch, e.ledgerSeq, at, "")
		src := g.meterProducers[u.f][u.i/g.per[u.f]]
		b := e.line
		b = append(b, `"ledger_entry_id":"led-`...)
		b = append(b, g.runTag...)
		b = append(b, '-')
		b = e.appendMeteringID(b, u)
		b = append(b, `","usage_id":"`...)
		b = e.appendMeteringRef(b, u, src)
		b = append(b, `","amount":"`...)
		b = posted.Append(b)
		b = append(b, `","currency":"`...)
		b = append(b, currency...)
		b = append(b, `","posted_at":`...)
		b = appendTime(b, at)
		e.line = b
		if err := e.send(); err != nil {
			return err
		}
	}
	e.ledgerQ = e.ledgerQ[:0]
	return nil
}

// ledgerAnomaly returns the billing anomaly the ledger injects for u, if
// any; a is u's description.
func (g *Generator) ledgerAnomaly(u *usageRec, a UsageAnomaly) (UsageAnomaly, bool) {
	if !g.cfg.Ledger.Enabled || !ratedUsage(u) {
		return a, false
	}
	outcome := g.ledgerOutcome(u)
	if outcome == ledgerPosted {
		return a, false
	}
	rated, posted, currency := g.ledgerAmounts(u, outcome)
	a.RatedAmount, a.Currency = rated.String(), currency
	a.Kind = string(contract.KindRatedNotLedgered)
	if outcome == ledgerWrong {
		a.Kind, a.LedgerAmount = string(contract.KindAmountMismatch), posted.String()
	}
	return a, true
}
