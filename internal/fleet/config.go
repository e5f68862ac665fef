package fleet

import (
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// DefaultStart is the default start of the generated timeline. It is fixed
// so that two runs with the same seed produce byte-identical output.
var DefaultStart = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// Config describes the fleet to generate. Every field has a default (see
// DefaultConfig); Validate checks that the timeline keeps the promises of the
// package documentation.
type Config struct {
	// Seed selects the fleet: the same seed and config give byte-identical
	// output, another seed gives another fleet. Default 1.
	Seed int64 `json:"seed"`
	// Environment is written into every envelope. Default local_parity.
	Environment string `json:"environment"`
	// Start is the time of scan round 0. Platform records are written at
	// Start - RecordLead. Default DefaultStart (2026-11-21T10:00:00Z).
	Start time.Time `json:"start"`
	// RecordLead is how long before Start the platform records are written
	// (version-2 updates follow at half of it). Default 2m.
	RecordLead time.Duration `json:"record_lead"`

	// Domains is the number of domains (regions); names come from a fixed
	// list ("eu-west", "us-east", ...). Default 4.
	Domains int `json:"domains"`
	// NodesPerDomain is the number of GPU nodes (gpuaas_allocation, maas)
	// per domain. Default 64.
	NodesPerDomain int `json:"nodes_per_domain"`
	// AppsPerDomain is the number of app instances (app_runtime) per
	// domain. Default 128.
	AppsPerDomain int `json:"apps_per_domain"`
	// VolumesPerDomain is the number of storage volumes (storage_provider)
	// per domain. Default 96.
	VolumesPerDomain int `json:"volumes_per_domain"`
	// EndpointsPerDomain is the number of model endpoints (model_serving,
	// gateway) per domain. Default 32.
	EndpointsPerDomain int `json:"endpoints_per_domain"`
	// Tenants is the number of tenants resources and usage are spread over.
	// Default 16.
	Tenants int `json:"tenants"`

	// Rounds is the number of scan rounds. Default 3, which is enough for
	// stale findings to reach operator_review.
	Rounds int `json:"rounds"`
	// RoundInterval is the time between the starts of two scan rounds.
	// Default 6m.
	RoundInterval time.Duration `json:"round_interval"`
	// ObservationSpread bounds the offsets of a round's observations,
	// heartbeats and usage after the round start. Default 20s.
	ObservationSpread time.Duration `json:"observation_spread"`
	// ScanDuration is the time from a round start to its scan markers.
	// It is long enough that every orphan's grace has passed at the first
	// scan marker of round 0 (see the package documentation). Default 5m50s.
	ScanDuration time.Duration `json:"scan_duration"`

	// Windows are the joiner's event-time windows the ground truth is
	// computed for. Default: the drift model's defaults.
	Windows Windows `json:"windows"`

	// Drift holds the fraction of each resource family that gets each drift
	// kind. Default DefaultDriftRates().
	Drift DriftRates `json:"drift"`
	// Node holds the fraction of GPU nodes that get each node-agent kind.
	// Default DefaultNodeRates().
	Node NodeRates `json:"node"`

	// UpdateRate is the fraction of healthy resources whose record gets a
	// version-2 update before round 0. Default 0.05.
	UpdateRate float64 `json:"update_rate"`
	// ReplayRate is the fraction of updated records whose version 1 is
	// replayed late (in round 1), which must change nothing. Default 0.5.
	ReplayRate float64 `json:"replay_rate"`
	// DuplicateRate is the fraction of events re-sent as exact redeliveries
	// later in the same round. Default 0.01.
	DuplicateRate float64 `json:"duplicate_rate"`

	// UsagePerResource is the number of usage events per owned, observed
	// resource per round. Default 1.
	UsagePerResource int `json:"usage_per_resource"`
	// DuplicateUsageRate is the fraction of usage events followed by a second
	// usage event with another usage_id and the same metering key
	// (billing duplicate_usage). Default 0.01.
	DuplicateUsageRate float64 `json:"duplicate_usage_rate"`
	// UnknownUnitRate is the fraction of usage events naming a unit that the
	// price book lacks or has retired (billing unknown_unit). Default 0.005.
	UnknownUnitRate float64 `json:"unknown_unit_rate"`
	// ConflictingUsageRate is the fraction of usage events followed, in a
	// new envelope, by a corrected copy under the same usage_id (the
	// quantity plus half a unit): the first stays rated, the copy is
	// billing conflicting_usage. Default 0, so the stream of an existing
	// config stays byte-identical; the fault test sets it.
	ConflictingUsageRate float64 `json:"conflicting_usage_rate"`

	// Core adds the fleet core (CONTRACT section 8): registry, fleet-core
	// fields, scripted lifecycle, authority, supply-chain and rollout
	// paths. Default DefaultCore().
	Core Core `json:"core"`

	// Ledger simulates the external ledger (ledger.entry events and the
	// rated_not_ledgered and amount_mismatch it injects). Default
	// DefaultLedger(), which is disabled.
	Ledger Ledger `json:"ledger"`
}

// Windows are the joiner's event-time windows (docs/drift-model.md).
type Windows struct {
	// Staleness: a live-expecting record not observed for this long is
	// missing. Default 10m.
	Staleness time.Duration `json:"staleness"`
	// OrphanGrace: an unowned live resource becomes an orphan after this
	// long. Default 5m.
	OrphanGrace time.Duration `json:"orphan_grace"`
	// AllowedLateness: the watermark trails the newest event by this much.
	// Default 30s.
	AllowedLateness time.Duration `json:"allowed_lateness"`
	// ReviewAfter is the number of consecutive disagreeing observations
	// after which a stale finding's posture becomes operator_review.
	// Default 3.
	ReviewAfter int `json:"review_after"`
}

// DriftRates are fractions of a family's population (all domains
// together). A kind that does not apply to a family (quota only to storage,
// route only to apps and endpoints, stale_version only to families with an
// expected version) is not injected there. The number of resources of a
// kind in a family is the rate times the population, rounded to nearest.
type DriftRates struct {
	Missing        float64 `json:"missing"`         // record live-expecting, never observed. Default 0.02.
	OrphanUnowned  float64 `json:"orphan_unowned"`  // observed live, no record at all. Default 0.02.
	OrphanReleased float64 `json:"orphan_released"` // record expects "released", observed live. Default 0.01.
	OrphanDeleted  float64 `json:"orphan_deleted"`  // record deleted (version 2), observed live. Default 0.01.
	StaleState     float64 `json:"stale_state"`     // observed state differs every round. Default 0.02.
	StaleVersion   float64 `json:"stale_version"`   // observed version (artifact digest) differs every round. Default 0.02.
	StaleResolved  float64 `json:"stale_resolved"`  // differs in round 0 only. Default 0.02.
	Quota          float64 `json:"quota"`           // storage usage above quota. Default 0.03.
	Route          float64 `json:"route"`           // route_target differs. Default 0.03.
	OwnerRef       float64 `json:"owner_ref"`       // owner_ref names another record. Default 0.01.
}

// NodeRates are fractions of all GPU nodes; node-agent kinds go only to
// nodes whose drift kind is healthy, so the sum must fit in them.
type NodeRates struct {
	CertMismatch   float64 `json:"cert_mismatch"`   // heartbeat cert issuer differs from the record. Default 0.02.
	ClonedIdentity float64 `json:"cloned_identity"` // one node_id from two host fingerprints. Default 0.01.
	AgentOutdated  float64 `json:"agent_outdated"`  // agent_version differs from expected (self-update). Default 0.03.
	Degraded       float64 `json:"degraded"`        // health DEGRADED with a lossy link. Default 0.03.
	Disconnected   float64 `json:"disconnected"`    // no heartbeats after round 0. Default 0.02.
	Replaying      float64 `json:"replaying"`       // replay_required with a backlog. Default 0.02.
}

// DefaultDriftRates returns the default drift rates.
func DefaultDriftRates() DriftRates {
	return DriftRates{
		Missing: 0.02, OrphanUnowned: 0.02, OrphanReleased: 0.01, OrphanDeleted: 0.01,
		StaleState: 0.02, StaleVersion: 0.02, StaleResolved: 0.02,
		Quota: 0.03, Route: 0.03, OwnerRef: 0.01,
	}
}

// DefaultNodeRates returns the default node-agent rates.
func DefaultNodeRates() NodeRates {
	return NodeRates{CertMismatch: 0.02, ClonedIdentity: 0.01, AgentOutdated: 0.03, Degraded: 0.03, Disconnected: 0.02, Replaying: 0.02}
}

// DefaultWindows returns the drift model's default windows.
func DefaultWindows() Windows {
	return Windows{Staleness: 10 * time.Minute, OrphanGrace: 5 * time.Minute, AllowedLateness: 30 * time.Second, ReviewAfter: 3}
}

// DefaultConfig returns the default fleet: 4 domains of 64 nodes, 128 apps,
// 96 volumes and 32 endpoints, scanned in 3 rounds 6 minutes apart.
func DefaultConfig() Config {
	return Config{
		Seed:               1,
		Environment:        contract.EnvLocalParity,
		Start:              DefaultStart,
		RecordLead:         2 * time.Minute,
		Domains:            4,
		NodesPerDomain:     64,
		AppsPerDomain:      128,
		VolumesPerDomain:   96,
		EndpointsPerDomain: 32,
		Tenants:            16,
		Rounds:             3,
		RoundInterval:      6 * time.Minute,
		ObservationSpread:  20 * time.Second,
		ScanDuration:       5*time.Minute + 50*time.Second,
		Windows:            DefaultWindows(),
		Drift:              DefaultDriftRates(),
		Node:               DefaultNodeRates(),
		UpdateRate:         0.05,
		ReplayRate:         0.5,
		DuplicateRate:      0.01,
		UsagePerResource:   1,
		DuplicateUsageRate: 0.01,
		UnknownUnitRate:    0.005,
		Ledger:             DefaultLedger(),
		Core:               DefaultCore(),
	}
}

// SizedConfig returns the default fleet resized to about events generated
// events (about 7.5 per identity): identities split over domains of at
// most 25,000 (GPU nodes, apps, volumes and endpoints 2:4:3:1). The
// benchmarks size their data sets with it.
func SizedConfig(events int) Config {
	cfg := DefaultConfig()
	ids := max(events*2/15, 100)
	cfg.Domains = min(max((ids+24_999)/25_000, 1), 99)
	per := max(ids/cfg.Domains, 10)
	cfg.NodesPerDomain = per * 2 / 10
	cfg.AppsPerDomain = per * 4 / 10
	cfg.VolumesPerDomain = per * 3 / 10
	cfg.EndpointsPerDomain = per - cfg.NodesPerDomain - cfg.AppsPerDomain - cfg.VolumesPerDomain
	return cfg
}

// Validate checks the config and that its timeline keeps the ground truth
// exact: no healthy resource crosses the staleness window, every orphan's
// grace ends at round 0's first scan marker, and each round's scan markers
// fall between its observations and the next round.
func (c *Config) Validate() error {
	if !contract.ValidEnvironment(c.Environment) {
		return &ConfigError{Field: "Environment", Detail: fmt.Sprintf("%q is not local_parity, dev or prod", c.Environment)}
	}
	if c.Start.IsZero() {
		return &ConfigError{Field: "Start", Detail: "required"}
	}
	for _, f := range []struct {
		name string
		v    int
		min  int
	}{
		{"Domains", c.Domains, 1}, {"NodesPerDomain", c.NodesPerDomain, 0}, {"AppsPerDomain", c.AppsPerDomain, 0},
		{"VolumesPerDomain", c.VolumesPerDomain, 0}, {"EndpointsPerDomain", c.EndpointsPerDomain, 0},
		{"Tenants", c.Tenants, 1}, {"Rounds", c.Rounds, 1}, {"UsagePerResource", c.UsagePerResource, 0},
		{"Windows.ReviewAfter", c.Windows.ReviewAfter, 1},
	} {
		if f.v < f.min {
			return &ConfigError{Field: f.name, Detail: fmt.Sprintf("%d is below %d", f.v, f.min)}
		}
	}
	if c.Domains > maxDomains {
		return &ConfigError{Field: "Domains", Detail: fmt.Sprintf("%d is above %d", c.Domains, maxDomains)}
	}
	for _, r := range c.rates() {
		if r.v < 0 || r.v > 1 || math.IsNaN(r.v) {
			return &ConfigError{Field: r.name, Detail: fmt.Sprintf("%v is not a fraction in [0, 1]", r.v)}
		}
	}
	w := c.Windows
	if c.RecordLead < 2*time.Millisecond {
		return &ConfigError{Field: "RecordLead", Detail: "must be at least 2ms"}
	}
	if c.ObservationSpread < time.Second {
		return &ConfigError{Field: "ObservationSpread", Detail: "must be at least 1s"}
	}
	if c.ScanDuration <= c.ObservationSpread {
		return &ConfigError{Field: "ScanDuration", Detail: "must exceed ObservationSpread so scan markers follow the round's observations"}
	}
	if c.ScanDuration-w.AllowedLateness < c.ObservationSpread+w.OrphanGrace {
		return &ConfigError{Field: "ScanDuration", Detail: fmt.Sprintf("%v is too short: orphans must pass their grace at round 0's scan markers; Possible solutions: set ScanDuration >= ObservationSpread + OrphanGrace + AllowedLateness (%v)", c.ScanDuration, c.ObservationSpread+w.OrphanGrace+w.AllowedLateness)}
	}
	if c.ScanDuration+time.Duration(len(families))*markerStep >= c.RoundInterval {
		return &ConfigError{Field: "RoundInterval", Detail: "must exceed ScanDuration so a round's scan markers precede the next round"}
	}
	if c.ScanDuration-w.AllowedLateness >= w.Staleness || c.RoundInterval+c.ObservationSpread-w.AllowedLateness >= w.Staleness {
		return &ConfigError{Field: "RoundInterval", Detail: "healthy resources would cross the staleness window between rounds; Possible solutions: shorten RoundInterval or ScanDuration"}
	}
	return c.validateLedger()
}

type namedRate struct {
	name string
	v    float64
}

func (c *Config) rates() []namedRate {
	d, n := c.Drift, c.Node
	return []namedRate{
		{"Drift.Missing", d.Missing}, {"Drift.OrphanUnowned", d.OrphanUnowned}, {"Drift.OrphanReleased", d.OrphanReleased},
		{"Drift.OrphanDeleted", d.OrphanDeleted}, {"Drift.StaleState", d.StaleState}, {"Drift.StaleVersion", d.StaleVersion},
		{"Drift.StaleResolved", d.StaleResolved}, {"Drift.Quota", d.Quota}, {"Drift.Route", d.Route}, {"Drift.OwnerRef", d.OwnerRef},
		{"Node.CertMismatch", n.CertMismatch}, {"Node.ClonedIdentity", n.ClonedIdentity}, {"Node.AgentOutdated", n.AgentOutdated},
		{"Node.Degraded", n.Degraded}, {"Node.Disconnected", n.Disconnected}, {"Node.Replaying", n.Replaying},
		{"UpdateRate", c.UpdateRate}, {"ReplayRate", c.ReplayRate}, {"DuplicateRate", c.DuplicateRate},
		{"DuplicateUsageRate", c.DuplicateUsageRate}, {"UnknownUnitRate", c.UnknownUnitRate},
		{"ConflictingUsageRate", c.ConflictingUsageRate},
	}
}

// rate returns the configured rate of a drift kind.
func (d DriftRates) rate(k Kind) float64 {
	switch k {
	case KindMissing:
		return d.Missing
	case KindOrphanUnowned:
		return d.OrphanUnowned
	case KindOrphanReleased:
		return d.OrphanReleased
	case KindOrphanDeleted:
		return d.OrphanDeleted
	case KindStaleState:
		return d.StaleState
	case KindStaleVersion:
		return d.StaleVersion
	case KindStaleResolved:
		return d.StaleResolved
	case KindQuota:
		return d.Quota
	case KindRoute:
		return d.Route
	case KindOwnerRef:
		return d.OwnerRef
	}
	return 0
}

// rate returns the configured rate of a node-agent kind.
func (n NodeRates) rate(k NodeKind) float64 {
	switch k {
	case NodeCertMismatch:
		return n.CertMismatch
	case NodeClonedIdentity:
		return n.ClonedIdentity
	case NodeAgentOutdated:
		return n.AgentOutdated
	case NodeDegraded:
		return n.Degraded
	case NodeDisconnected:
		return n.Disconnected
	case NodeReplaying:
		return n.Replaying
	}
	return 0
}

// RegisterFlags registers one flag per field on fs, with c's values as
// defaults, prefixed by "fleet.".
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Int64Var(&c.Seed, "fleet.seed", c.Seed, "seed: the same seed and flags give byte-identical output")
	fs.StringVar(&c.Environment, "fleet.env", c.Environment, "environment written into every envelope; must match the pipeline's")
	fs.Func("fleet.start", "start of scan round 0, RFC 3339 or \"now\" (default "+c.Start.Format(time.RFC3339)+"; \"now\" breaks reproducibility)", func(s string) error {
		if s == "now" {
			c.Start = time.Now().UTC().Truncate(time.Millisecond)
			return nil
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return err
		}
		c.Start = t.UTC()
		return nil
	})
	fs.IntVar(&c.Domains, "fleet.domains", c.Domains, "number of domains (regions)")
	fs.IntVar(&c.NodesPerDomain, "fleet.nodes", c.NodesPerDomain, "GPU nodes per domain")
	fs.IntVar(&c.AppsPerDomain, "fleet.apps", c.AppsPerDomain, "app instances per domain")
	fs.IntVar(&c.VolumesPerDomain, "fleet.volumes", c.VolumesPerDomain, "storage volumes per domain")
	fs.IntVar(&c.EndpointsPerDomain, "fleet.endpoints", c.EndpointsPerDomain, "model endpoints per domain")
	fs.IntVar(&c.Tenants, "fleet.tenants", c.Tenants, "tenants resources and usage are spread over")
	fs.IntVar(&c.Rounds, "fleet.rounds", c.Rounds, "scan rounds; fewer than 3 keeps stale findings at posture retry")
	fs.DurationVar(&c.RoundInterval, "fleet.roundInterval", c.RoundInterval, "time between scan rounds; must stay below staleness minus spread")
	fs.IntVar(&c.UsagePerResource, "fleet.usagePerResource", c.UsagePerResource, "usage events per resource per round")
	fs.Float64Var(&c.DuplicateRate, "fleet.duplicateRate", c.DuplicateRate, "fraction of events re-sent as exact redeliveries")
	fs.Float64Var(&c.UpdateRate, "fleet.updateRate", c.UpdateRate, "fraction of healthy records updated to version 2")
	fs.Float64Var(&c.ReplayRate, "fleet.replayRate", c.ReplayRate, "fraction of updated records whose version 1 is replayed late")
	fs.Float64Var(&c.DuplicateUsageRate, "fleet.rate.duplicateUsage", c.DuplicateUsageRate, "fraction of usage events duplicated under another usage_id")
	fs.Float64Var(&c.ConflictingUsageRate, "fleet.rate.conflictingUsage", c.ConflictingUsageRate, "fraction of usage events followed by a corrected copy under the same usage_id (conflicting_usage)")
	fs.Float64Var(&c.UnknownUnitRate, "fleet.rate.unknownUnit", c.UnknownUnitRate, "fraction of usage events naming an unknown or retired unit")
	fs.BoolVar(&c.Core.Enabled, "fleet.core", c.Core.Enabled, "add the fleet core: registry, lifecycle intents, authority, policy bundles, artifacts, relays and the scripted nodes")
	fs.BoolVar(&c.Core.BadInput, "fleet.core.badInput", c.Core.BadInput, "add three fleet-core events the pipeline must reject (unknown node_kind, unknown artifact, unknown policy bundle)")
	l := &c.Ledger
	fs.BoolVar(&l.Enabled, "fleet.ledger", l.Enabled, "simulate the ledger: post ledger.entry events for rated usage, with injected rated_not_ledgered and amount_mismatch")
	fs.DurationVar(&l.Delay, "fleet.ledger.delay", l.Delay, "how long after its usage a ledger entry is posted (event time); must stay below the ledger grace")
	fs.DurationVar(&l.LedgerGrace, "fleet.ledger.grace", l.LedgerGrace, "the billing reconciler's ledger grace the ground truth is computed for")
	fs.Float64Var(&l.MissingRate, "fleet.rate.ledgerMissing", l.MissingRate, "fraction of rated usage never posted to the ledger (in rounds whose grace passes)")
	fs.Float64Var(&l.WrongAmountRate, "fleet.rate.ledgerWrongAmount", l.WrongAmountRate, "fraction of rated usage posted with a wrong amount")
	d := &c.Drift
	fs.Float64Var(&d.Missing, "fleet.rate.missing", d.Missing, "fraction of resources missing at the provider")
	fs.Float64Var(&d.OrphanUnowned, "fleet.rate.orphanUnowned", d.OrphanUnowned, "fraction of resources observed with no record")
	fs.Float64Var(&d.OrphanReleased, "fleet.rate.orphanReleased", d.OrphanReleased, "fraction of resources released but still running")
	fs.Float64Var(&d.OrphanDeleted, "fleet.rate.orphanDeleted", d.OrphanDeleted, "fraction of resources deleted but still running")
	fs.Float64Var(&d.StaleState, "fleet.rate.staleState", d.StaleState, "fraction of resources in the wrong lifecycle state")
	fs.Float64Var(&d.StaleVersion, "fleet.rate.staleVersion", d.StaleVersion, "fraction of resources running the wrong artifact")
	fs.Float64Var(&d.StaleResolved, "fleet.rate.staleResolved", d.StaleResolved, "fraction of resources stale in round 0 only")
	fs.Float64Var(&d.Quota, "fleet.rate.quota", d.Quota, "fraction of volumes above quota")
	fs.Float64Var(&d.Route, "fleet.rate.route", d.Route, "fraction of apps and endpoints with a wrong route")
	fs.Float64Var(&d.OwnerRef, "fleet.rate.ownerRef", d.OwnerRef, "fraction of resources whose owner_ref names another record")
	n := &c.Node
	fs.Float64Var(&n.CertMismatch, "fleet.rate.certMismatch", n.CertMismatch, "fraction of nodes with a foreign cert issuer")
	fs.Float64Var(&n.ClonedIdentity, "fleet.rate.clonedIdentity", n.ClonedIdentity, "fraction of nodes reported from two hosts")
	fs.Float64Var(&n.AgentOutdated, "fleet.rate.agentOutdated", n.AgentOutdated, "fraction of nodes with an outdated agent")
	fs.Float64Var(&n.Degraded, "fleet.rate.degraded", n.Degraded, "fraction of nodes reporting DEGRADED health")
	fs.Float64Var(&n.Disconnected, "fleet.rate.disconnected", n.Disconnected, "fraction of nodes silent after round 0")
	fs.Float64Var(&n.Replaying, "fleet.rate.replaying", n.Replaying, "fraction of nodes replaying a backlog")
}
