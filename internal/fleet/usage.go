package fleet

import (
	"bytes"
	"math/rand/v2"
	"time"

	json "github.com/segmentio/encoding/json"
)

// Unit is one entry of the usage-unit price book (CONTRACT 3.7).
type Unit struct {
	UnitID         string `json:"unit_id"`
	Version        int64  `json:"version"`
	Precision      int    `json:"precision"`  // decimal places of a rated amount
	UnitPrice      string `json:"unit_price"` // decimal string
	Currency       string `json:"currency"`
	RatingCategory string `json:"rating_category"`
	Lifecycle      string `json:"lifecycle"` // active | retired
}

// PriceBook is the file shape the rater loads: {"units": [...]}.
type PriceBook struct {
	Units []Unit `json:"units"`
}

// Unit ids the generator meters. Usage of UnitRetired or UnitUnknown is the
// injected unknown_unit billing drift.
const (
	UnitGPUHour       = "gpu_hour"
	UnitAppVCPUHour   = "app_vcpu_hour"
	UnitStorageGBHour = "storage_gb_hour"
	UnitTokens1K      = "tokens_1k"
	UnitRetired       = "gpu_hour_legacy" // in the price book, lifecycle retired
	UnitUnknown       = "gpu_minute"      // not in the price book
)

// DefaultPriceBook returns the price book the generator assumes: one
// active version of each metered unit and one retired unit.
func DefaultPriceBook() PriceBook {
	return PriceBook{Units: []Unit{
		{UnitID: UnitGPUHour, Version: 1, Precision: 2, UnitPrice: "2.450000", Currency: "USD", RatingCategory: "compute", Lifecycle: "active"},
		{UnitID: UnitAppVCPUHour, Version: 1, Precision: 4, UnitPrice: "0.042500", Currency: "USD", RatingCategory: "compute", Lifecycle: "active"},
		{UnitID: UnitStorageGBHour, Version: 1, Precision: 6, UnitPrice: "0.000139", Currency: "USD", RatingCategory: "storage", Lifecycle: "active"},
		{UnitID: UnitTokens1K, Version: 1, Precision: 6, UnitPrice: "0.002000", Currency: "USD", RatingCategory: "inference", Lifecycle: "active"},
		{UnitID: UnitRetired, Version: 1, Precision: 2, UnitPrice: "2.100000", Currency: "USD", RatingCategory: "compute", Lifecycle: "retired"},
	}}
}

// JSON returns the price book as indented JSON, the file the rater loads.
func (p PriceBook) JSON() ([]byte, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// usageRec is one usage event being generated.
type usageRec struct {
	f, i, r, k  int
	at          time.Time
	windowStart time.Time
	windowEnd   time.Time
	unit        string
	micros      int64 // quantity in millionths of the unit
	tenant      int
	duplicate   bool // the second usage_id of a duplicate_usage pair
	corrected   bool // the corrected copy of a conflicting_usage pair: the same usage_id, another quantity
	anomaly     uint8
}

// Usage anomaly classes of a base usage event.
const (
	usageNormal uint8 = iota
	usageDuplicated
	usageUnknownUnit
	usageConflicting // followed by a corrected copy (last: a config without it draws as before)
)

// correctionMicros is what a corrected copy adds to the quantity: half a
// unit.
const correctionMicros = 500_000

// usageWalker walks the usage events of the fleet in emission order. Its
// anomaly draws come from their own random stream, so Emit and Truth,
// each with a fresh walker, see the same events.
type usageWalker struct {
	g    *Generator
	rng  *rand.Rand
	left []int // base events left per anomaly class
	n    int   // base events left
	rec  usageRec
}

func (g *Generator) newUsageWalker() *usageWalker {
	return &usageWalker{
		g:    g,
		rng:  rand.New(rand.NewPCG(uint64(g.cfg.Seed), 0xa4093822299f31d0)),
		left: []int{g.usageBase - g.usageDup - g.usageUnknown - g.usageConflict, g.usageDup, g.usageUnknown, g.usageConflict},
		n:    g.usageBase,
	}
}

// round calls fn for every usage event of round r. The rec passed to fn is
// reused.
func (w *usageWalker) round(r int, fn func(*usageRec) error) error {
	g := w.g
	rs := g.roundStart(r)
	u := &w.rec
	for f := range families {
		for i, k := range g.kinds[f] {
			if !k.active() {
				continue
			}
			for j := 0; j < g.cfg.UsagePerResource; j++ {
				*u = usageRec{f: f, i: i, r: r, k: j, tenant: g.tenant(f, i),
					windowStart: rs.Add(-g.cfg.RoundInterval), windowEnd: rs}
				seq := r*g.cfg.UsagePerResource + j
				u.at = rs.Add(g.offset(tagUsageOffset, f, i, seq, g.cfg.ObservationSpread))
				u.unit, u.micros = g.usageAmount(f, i, seq)
				c := sampleOne(w.rng, w.left, &w.n)
				u.anomaly = c
				if c == usageUnknownUnit {
					u.unit = UnitUnknown
					if g.hash(tagUnit, rid(f, i), uint64(seq))&1 == 0 {
						u.unit = UnitRetired
					}
				}
				if err := fn(u); err != nil {
					return err
				}
				if c == usageDuplicated {
					u.duplicate = true
					if err := fn(u); err != nil {
						return err
					}
				}
				if c == usageConflicting {
					u.corrected = true
					if err := fn(u); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// sampleOne draws one class by selection sampling (see sample).
func sampleOne(rng *rand.Rand, left []int, n *int) uint8 {
	if *n <= 0 {
		panic("BUG: sampleOne: more usage events than planned")
	}
	r := rng.IntN(*n)
	*n--
	for c, w := range left {
		if r < w {
			left[c]--
			return uint8(c)
		}
		r -= w
	}
	panic("BUG: sampleOne: counts do not add up")
}

// usageAmount returns the unit and quantity (micro-units) of resource
// (f, i)'s usage event number seq. Quantities are whole micro-units.
func (g *Generator) usageAmount(f, i, seq int) (string, int64) {
	h := g.hash(tagSize, rid(f, i), 0)
	per := g.cfg.RoundInterval.Microseconds() / 3600 // micro-hours of one round, per 1e6
	switch f {
	case famNodes:
		return UnitGPUHour, int64(1+h%8) * per
	case famApps:
		return UnitAppVCPUHour, int64(1+h%16) * per
	case famVolumes:
		return UnitStorageGBHour, g.quotaGB(i) * per
	default:
		v := g.hash(tagSize, rid(f, i), uint64(seq)+1)
		return UnitTokens1K, int64(1000+v%4_999_000) * 1000
	}
}
