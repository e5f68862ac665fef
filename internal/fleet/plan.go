package fleet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// Resource flags.
const (
	flagUpdated  uint8 = 1 << iota // record has a version-2 update
	flagReplayed                   // version 1 is replayed late
)

// markerStep separates the scan markers of the providers of one round.
const markerStep = 100 * time.Millisecond

// Hash tags: each per-resource attribute draws from its own hash stream.
const (
	tagTenant uint64 = iota + 1
	tagObsOffset
	tagHBOffset
	tagUsageOffset
	tagRecOffset
	tagVersion
	tagQuota
	tagUsage
	tagHost
	tagCert
	tagIngress
	tagSize
	tagLink
	tagUnit
	tagRoute
	tagLedger
)

// domain is one generated domain.
type domain struct {
	name      string
	id        string
	certFP    string // cert_issuer_fingerprint of its nodes
	ingressFP string // ingress_trust_fingerprint of its nodes
}

// Generator produces one fleet's event stream and its ground truth. Plan
// data (one byte or two per resource) is built by New; events are produced
// on demand by Emit, so the stream is never held in memory. A Generator is
// not safe for concurrent Emit calls; each Emit produces the same stream.
type Generator struct {
	cfg     Config
	seedMix uint64
	runTag  string // short hex of the seed, in usage ids
	domains []domain
	per     [len(families)]int     // resources per domain of each family
	kinds   [len(families)][]Kind  // drift kind of each resource
	flags   [len(families)][]uint8 // flagUpdated, flagReplayed
	nodes   []NodeKind             // node-agent kind of each node
	roles   []Role                 // fleet-core role of each node
	roleCnt [numRoles]int
	badNode int // node whose bad heartbeat Core.BadInput sends, -1 for none
	counts  [len(families)][numKinds]int
	nodeCnt [numNodeKinds]int

	// Usage plan: base usage events and how many get each anomaly.
	usageBase     int
	usageDup      int
	usageUnknown  int
	usageConflict int

	// Precomputed producer names.
	recProducers   []string                // per domain
	scanProducers  [len(families)][]string // per family and domain
	meterProducers [len(families)][]string // per family and domain (also metering_source)
	markProducers  [len(families)]string   // per family
	scanIDs        [len(families)][]string // per family and round
}

// New validates cfg and plans the fleet: which resource gets which kind.
func New(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{cfg: cfg, seedMix: mix64(uint64(cfg.Seed) ^ 0x6a09e667f3bcc908)}
	g.runTag = fmt.Sprintf("%08x", uint32(g.seedMix>>32))
	g.per = [len(families)]int{cfg.NodesPerDomain, cfg.AppsPerDomain, cfg.VolumesPerDomain, cfg.EndpointsPerDomain}
	for d := 0; d < cfg.Domains; d++ {
		name := fmt.Sprintf("region-%02d", d+1)
		if d < len(domainNames) {
			name = domainNames[d]
		}
		g.domains = append(g.domains, domain{
			name:      name,
			id:        "dom-" + strconv.FormatUint(g.hash(tagCert, uint64(d), 99)%1e6+1e6, 10)[1:] + "-" + name,
			certFP:    string(appendFingerprint(nil, g.hash(tagCert, uint64(d), 0))),
			ingressFP: string(appendFingerprint(nil, g.hash(tagIngress, uint64(d), 0))),
		})
		g.recProducers = append(g.recProducers, "platform-records-"+name)
	}
	scanner := [len(families)]string{"maas-scanner", "appruntime-scanner", "storage-scanner", "gateway-scanner"}
	meter := [len(families)]string{"gpu-meter", "app-meter", "storage-meter", "gateway-usage"}
	for f := range families {
		for _, d := range g.domains {
			g.scanProducers[f] = append(g.scanProducers[f], scanner[f]+"-"+d.name)
			g.meterProducers[f] = append(g.meterProducers[f], meter[f]+"-"+d.name)
		}
		g.markProducers[f] = scanner[f] + "-coordinator"
		for r := 0; r < cfg.Rounds; r++ {
			g.scanIDs[f] = append(g.scanIDs[f], "scan-"+families[f].provider+"-"+strconv.Itoa(r))
		}
	}
	if err := g.plan(); err != nil {
		return nil, err
	}
	return g, nil
}

// Config returns the generator's config.
func (g *Generator) Config() Config { return g.cfg }

// plan assigns kinds with exact counts: selection sampling draws each
// resource's kind with probability remaining-of-kind / remaining-resources,
// which gives a uniformly random assignment with exactly the requested
// number of each kind.
func (g *Generator) plan() error {
	rng := rand.New(rand.NewPCG(uint64(g.cfg.Seed), 0x3243f6a8885a308d))
	for f := range families {
		fam := &families[f]
		n := g.per[f] * g.cfg.Domains
		want := make([]int, numKinds)
		total := 0
		for k := KindHealthy + 1; k < numKinds; k++ {
			if fam.applies(k) {
				want[k] = roundCount(g.cfg.Drift.rate(k), n)
				total += want[k]
			}
		}
		if total > n {
			return fmt.Errorf("family %s: drift rates ask for %d of %d resources: %w", fam.name, total, n, ErrPopulation)
		}
		want[KindHealthy] = n - total
		copy(g.counts[f][:], want)
		g.kinds[f] = make([]Kind, n)
		for i, c := range sample(rng, n, want, nil) {
			g.kinds[f][i] = Kind(c)
		}
		if want[KindOwnerRef] > 0 && n-want[KindOrphanUnowned] < 2 {
			return fmt.Errorf("family %s: owner_ref needs at least two records: %w", fam.name, ErrPopulation)
		}

		// Record updates and replays among healthy resources.
		g.flags[f] = make([]uint8, n)
		healthy := want[KindHealthy]
		upd := roundCount(g.cfg.UpdateRate, healthy)
		rep := roundCount(g.cfg.ReplayRate, upd)
		isHealthy := func(i int) bool { return g.kinds[f][i] == KindHealthy }
		for i, c := range sample(rng, n, []int{healthy - upd, upd}, isHealthy) {
			if c == 1 {
				g.flags[f][i] |= flagUpdated
			}
		}
		isUpdated := func(i int) bool { return g.flags[f][i]&flagUpdated != 0 }
		for i, c := range sample(rng, n, []int{upd - rep, rep}, isUpdated) {
			if c == 1 {
				g.flags[f][i] |= flagReplayed
			}
		}
	}

	// Node-agent kinds among drift-healthy nodes.
	nn := len(g.kinds[famNodes])
	want := make([]int, numNodeKinds)
	total := 0
	for k := NodeHealthy + 1; k < numNodeKinds; k++ {
		want[k] = roundCount(g.cfg.Node.rate(k), nn)
		total += want[k]
	}
	healthy := g.counts[famNodes][KindHealthy]
	if total > healthy {
		return fmt.Errorf("node-agent rates ask for %d nodes, only %d nodes are drift-healthy: %w", total, healthy, ErrPopulation)
	}
	want[NodeHealthy] = healthy - total
	copy(g.nodeCnt[:], want)
	g.nodes = make([]NodeKind, nn)
	isHealthy := func(i int) bool { return g.kinds[famNodes][i] == KindHealthy }
	for i, c := range sample(rng, nn, want, isHealthy) {
		g.nodes[i] = NodeKind(c)
	}

	// Usage anomalies: exact counts among base usage events.
	active := 0
	for f := range families {
		for _, k := range g.kinds[f] {
			if k.active() {
				active++
			}
		}
	}
	g.usageBase = active * g.cfg.Rounds * g.cfg.UsagePerResource
	g.usageDup = roundCount(g.cfg.DuplicateUsageRate, g.usageBase)
	g.usageUnknown = roundCount(g.cfg.UnknownUnitRate, g.usageBase)
	g.usageConflict = roundCount(g.cfg.ConflictingUsageRate, g.usageBase)
	if n := g.usageDup + g.usageUnknown + g.usageConflict; n > g.usageBase {
		return fmt.Errorf("usage anomaly rates ask for %d of %d usage events: %w", n, g.usageBase, ErrPopulation)
	}
	g.planCore()
	return nil
}

// sample draws a class for each of the n items that pass eligible (all when
// eligible is nil), with exactly want[c] items of class c; ineligible items
// get class 0. want must sum to the number of eligible items.
func sample(rng *rand.Rand, n int, want []int, eligible func(int) bool) []uint8 {
	left := append([]int(nil), want...)
	remaining := 0
	for _, w := range left {
		remaining += w
	}
	out := make([]uint8, n)
	for i := 0; i < n; i++ {
		if eligible != nil && !eligible(i) {
			continue
		}
		if remaining == 0 {
			panic("BUG: sample: more eligible items than wanted")
		}
		r := rng.IntN(remaining)
		for c, w := range left {
			if r < w {
				out[i] = uint8(c)
				left[c]--
				break
			}
			r -= w
		}
		remaining--
	}
	return out
}

func roundCount(rate float64, n int) int {
	return int(math.Round(rate * float64(n)))
}

// mix64 is the splitmix64 finalizer: a bijection on uint64 with good
// avalanche, so distinct inputs give distinct, well-spread outputs.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// hash derives a per-resource value from the seed; attributes are pure
// functions of (seed, tag, a, b), so Emit and Truth agree without sharing
// state.
func (g *Generator) hash(tag, a, b uint64) uint64 {
	h := mix64(g.seedMix + tag*0x9e3779b97f4a7c15)
	h = mix64(h ^ a)
	return mix64(h ^ (b + 0x632be59bd9b4e019))
}

// rid is a resource's identity within the fleet.
func rid(f, i int) uint64 { return uint64(f)<<40 | uint64(i) }

// roundStart is R_r.
func (g *Generator) roundStart(r int) time.Time {
	return g.cfg.Start.Add(time.Duration(r) * g.cfg.RoundInterval)
}

// offset is a deterministic offset in [0, span) at millisecond grain.
func (g *Generator) offset(tag uint64, f, i, r int, span time.Duration) time.Duration {
	ms := uint64(span / time.Millisecond)
	return time.Duration(g.hash(tag, rid(f, i), uint64(r))%ms) * time.Millisecond
}

// recordTimes returns the occurred_at of a resource's version 1 and 2.
func (g *Generator) recordTimes(f, i int) (v1, v2 time.Time) {
	lead := g.cfg.RecordLead
	span := lead / 4
	if span < time.Millisecond {
		span = time.Millisecond
	}
	v1 = g.cfg.Start.Add(-lead).Add(g.offset(tagRecOffset, f, i, 1, span))
	v2 = g.cfg.Start.Add(-lead / 2).Add(g.offset(tagRecOffset, f, i, 2, span))
	return v1, v2
}

// tenant returns a resource's tenant index.
func (g *Generator) tenant(f, i int) int {
	return int(g.hash(tagTenant, rid(f, i), 0) % uint64(g.cfg.Tenants))
}

// quotaGB returns a volume's current quota in GB (100..2000).
func (g *Generator) quotaGB(i int) int64 {
	return 100 + int64(g.hash(tagQuota, rid(famVolumes, i), 0)%1901)
}

// usageMilli returns a volume's observed usage in thousandths of a GB.
func (g *Generator) usageMilli(i, r int, over bool) int64 {
	q := g.quotaGB(i) * 1000
	h := g.hash(tagUsage, rid(famVolumes, i), uint64(r))
	if over {
		return q + q*int64(1+h%50)/100 + 1 // 101%..150% of quota
	}
	return q * int64(10+h%81) / 100 // 10%..90% of quota
}

// Version generations.
const (
	genCurrent = 0 // what the record expects and a healthy provider reports
	genOld     = 1 // version 1 of an updated record
	genWrong   = 2 // what a stale_version resource reports
)

// appendVersion appends the expected or observed version of generation gen:
// an OCI digest for apps and endpoints, an image name for nodes.
func (g *Generator) appendVersion(b []byte, f, i, gen int) []byte {
	if !families[f].hasVersion {
		return b
	}
	if f == famNodes {
		base := 100 + int(g.hash(tagVersion, rid(f, i), 0)%50)
		switch gen {
		case genOld:
			base--
		case genWrong:
			base += 7
		}
		b = append(b, "ubuntu-24.04-gpu-r"...)
		return strconv.AppendInt(b, int64(base), 10)
	}
	return appendFingerprint(b, g.hash(tagVersion, rid(f, i), uint64(gen)))
}
