package fleet

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// Core configures the fleet core of CONTRACT section 8 in the generated
// fleet: the registry (artifacts and policy bundles), the fleet-core fields
// of node records and heartbeats, and the scripted nodes of Role.
type Core struct {
	// Enabled adds the fleet core to the stream. Default true.
	Enabled bool `json:"enabled"`
	// BadInput adds three events the pipeline must reject: a node record
	// with an unknown node_kind (the gateway's invalid_field), a policy
	// bundle naming an unknown artifact (the joiner's unknown_artifact) and
	// a heartbeat naming an unknown policy bundle (the joiner's
	// unknown_policy_bundle). Truth.Fleet.Rejections lists them. Default
	// false: consumers that decode every event keep working.
	BadInput bool `json:"bad_input"`
}

// DefaultCore returns the default fleet core: enabled, no bad input.
func DefaultCore() Core { return Core{Enabled: true} }

// Role is the scripted fleet-core path of one node. Roles go to nodes that
// are drift-healthy, node-agent-healthy and not updated, a fixed number per
// role (fewer when the fleet is too small); every other node runs its
// bundle's target at the bundle's artifact under its domain's primary
// controller.
type Role uint8

// Roles.
const (
	RoleNone Role = iota
	// RoleReturn: heartbeats in round 0 (the last at R_0+2m), silent in
	// round 1 (AUTONOMOUS at round 1's scan markers), back in round 2:
	// RETURNING, then REPLAYING (replay_required with a backlog), then
	// LIVE_OK.
	RoleReturn
	// RoleReturnQuarantined: as RoleReturn, but from its return on it runs
	// an artifact whose digest is not the registry's: QUARANTINED.
	RoleReturnQuarantined
	// RoleRevoked runs the artifact the registry revokes in round 1.
	RoleRevoked
	// RoleUnknownArtifact runs an artifact the registry does not have.
	RoleUnknownArtifact
	// RoleDigestMismatch runs its bundle's artifact with another digest.
	RoleDigestMismatch
	// RoleSplitBrain obeys its domain's second controller at R_r+3m of
	// every round, the first one otherwise: split_brain.
	RoleSplitBrain
	// RoleSplitBrainResolved obeys the second controller once, in round 0:
	// split_brain until that command leaves the staleness window.
	RoleSplitBrainResolved
	// RoleUnlistedController obeys a controller its record does not list.
	RoleUnlistedController
	// RoleBehind stays on the old version of the rollout bundle with no
	// update under way: behind once the deadline passed.
	RoleBehind
	// RoleUpdating self-updates towards the rollout bundle and never gets
	// there: updating, behind once the deadline passed.
	RoleUpdating
	// RoleUpdateFailed self-updates towards the rollout bundle with health
	// DEGRADED: failed (DEGRADED / UPDATE_FAILED).
	RoleUpdateFailed
	// RoleUpdateCompletes self-updates in round 0 and is at target from
	// round 1 on.
	RoleUpdateCompletes
	// RoleCanaryUpdating self-updates towards the canary bundle, whose
	// deadline is far: updating at the end.
	RoleCanaryUpdating
	// RoleProvisioning: lifecycle_intent PROVISIONING throughout.
	RoleProvisioning
	// RoleEnrolled: PROVISIONING, then ENROLLED (record version 2 in round 1).
	RoleEnrolled
	// RoleDecommissioning: no intent (ACTIVE), then DECOMMISSIONING.
	RoleDecommissioning
	// RoleRetired: DECOMMISSIONING, then RETIRED; it desires no bundle.
	RoleRetired
	numRoles
)

var roleNames = [numRoles]string{"", "return", "return_quarantined", "revoked_artifact", "unknown_artifact",
	"digest_mismatch", "split_brain", "split_brain_resolved", "unlisted_controller", "behind", "updating",
	"update_failed", "update_completes", "canary_updating", "provisioning", "enrolled", "decommissioning", "retired"}

func (r Role) String() string {
	if r < numRoles {
		return roleNames[r]
	}
	return "unknown"
}

// roleCount is the number of nodes each role gets (when enough eligible
// nodes exist).
var roleCount = [numRoles]int{0, 3, 1, 3, 1, 1, 2, 1, 1, 2, 2, 1, 2, 2, 2, 2, 2, 1}

// Registry of the generated fleet.
const (
	artStable    = 0 // art-agent-2026.10, pb-stable's
	artRollout   = 1 // art-agent-2026.11, pb-rollout's
	artCanary    = 2 // art-agent-2026.12, pb-canary's
	artRevoked   = 3 // art-agent-2026.09, revoked in round 1
	numArtifacts = 4
)

var artifactIDs = [numArtifacts]string{"art-agent-2026.10", "art-agent-2026.11", "art-agent-2026.12", "art-agent-2026.09"}
var artifactVersions = [numArtifacts]string{"2026.10.4", "2026.11.1", "2026.12.0", "2026.09.7"}

const (
	bundleStable  = 0 // every domain, deadline a day before Start: all at target
	bundleRollout = 1 // the first two domains, deadline mid round 1: stragglers
	bundleCanary  = 2 // the third domain, deadline a day after Start
	numBundles    = 3
)

var bundleIDs = [numBundles]string{"pb-stable", "pb-rollout", "pb-canary"}
var bundleArtifact = [numBundles]int{artStable, artRollout, artCanary}

// Names of the bad input (Core.BadInput) and of the unknown things roles
// report.
const (
	sideloadArtifact    = "art-agent-sideload" // RoleUnknownArtifact's
	badBundle           = "pb-hotfix"          // names badBundleArtifact
	badBundleArtifact   = "art-agent-unsigned"
	badHeartbeatBundle  = "pb-retracted"
	badNodeKind         = "SATELLITE"
	registryProducer    = "fleet-registry"
	corrRegistry        = "registry-sync"
	corrRevoke          = "registry-revoke-2026.09"
	corrRecordsIntent   = "platform-sync-intent"
	noneControllerLabel = ""
)

// Tags of hash streams of the fleet core (after the generator's own).
const (
	tagNodeKind uint64 = iota + 100
	tagMaster
	tagRelay
	tagTier
	tagBoot
	tagArtifact
	tagIntent
	tagMid
	tagCoreRole
)

var tiers = [...]string{"gold", "silver", "bronze"}

// Mid-round heartbeat slots: slot k (1..3) beats at R_r + k minutes + a
// per-node offset under ObservationSpread, after the round's usage.
const numSlots = 4

// planCore assigns roles. It draws from its own random stream, so the plan
// of everything else is the same with or without the fleet core.
func (g *Generator) planCore() {
	nn := len(g.kinds[famNodes])
	g.roles = make([]Role, nn)
	if !g.cfg.Core.Enabled {
		return
	}
	rng := rand.New(rand.NewPCG(uint64(g.cfg.Seed), 0x452821e638d01377))
	order := rng.Perm(nn)
	for r := RoleNone + 1; r < numRoles; r++ {
		left := roleCount[r]
		for _, i := range order {
			if left == 0 {
				break
			}
			if g.roles[i] != RoleNone || g.kinds[famNodes][i] != KindHealthy || g.nodes[i] != NodeHealthy ||
				g.flags[famNodes][i]&flagUpdated != 0 || !g.roleFits(r, i) {
				continue
			}
			g.roles[i] = r
			g.roleCnt[r]++
			left--
		}
	}
	// The bad heartbeat goes to a plain node of the first domain.
	g.badNode = -1
	for _, i := range order {
		if g.roles[i] == RoleNone && g.kinds[famNodes][i] == KindHealthy && g.nodes[i] == NodeHealthy {
			g.badNode = i
			break
		}
	}
}

// roleFits reports whether node i's domain suits role r: rollout roles need
// a domain of pb-rollout, the canary role pb-canary's.
func (g *Generator) roleFits(r Role, i int) bool {
	d := i / g.per[famNodes]
	switch r {
	case RoleBehind, RoleUpdating, RoleUpdateFailed, RoleUpdateCompletes:
		return g.domainBundle(d) == bundleRollout
	case RoleCanaryUpdating:
		return g.domainBundle(d) == bundleCanary
	}
	return true
}

// domainBundle is the bundle the nodes of domain d desire.
func (g *Generator) domainBundle(d int) int {
	switch {
	case d < 2:
		return bundleRollout
	case d == 2:
		return bundleCanary
	}
	return bundleStable
}

// bundleDomains returns the domain ids a bundle is for (nil: all).
func (g *Generator) bundleDomains(b int) []string {
	var out []string
	for d := range g.domains {
		if b != bundleStable && g.domainBundle(d) == b {
			out = append(out, g.domains[d].id)
		}
	}
	return out
}

// bundleDeadline returns a bundle's deadline.
func (g *Generator) bundleDeadline(b int) time.Time {
	switch b {
	case bundleStable:
		return g.cfg.Start.Add(-24 * time.Hour)
	case bundleRollout:
		return g.roundStart(1).Add(g.cfg.RoundInterval / 2)
	}
	return g.cfg.Start.Add(24 * time.Hour)
}

// artifactDigest returns the registry digest of artifact a.
func (g *Generator) artifactDigest(a int) string {
	return string(appendFingerprint(nil, g.hash(tagArtifact, uint64(a), 0)))
}

// registryAt is when the registry is published: before every record.
func (g *Generator) registryAt() time.Time {
	return g.cfg.Start.Add(-g.cfg.RecordLead - time.Minute)
}

// revokeRound is the round at whose start the revocation is published.
func (g *Generator) revokeRound() int { return g.replayRound() }

// nodeBundle returns the bundle node i desires, -1 for none.
func (g *Generator) nodeBundle(i int) int {
	if !g.cfg.Core.Enabled || !g.kinds[famNodes][i].active() || g.roles[i] == RoleRetired {
		return -1
	}
	return g.domainBundle(i / g.per[famNodes])
}

// nodeKind returns node i's node_kind.
func (g *Generator) nodeKind(i int) contract.NodeKind {
	return contract.NodeKinds[g.hash(tagNodeKind, rid(famNodes, i), 0)%uint64(len(contract.NodeKinds))]
}

// master returns node i's master_of_record.
func (g *Generator) master(i int) contract.MasterOfRecord {
	return contract.MastersOfRecord[g.hash(tagMaster, rid(famNodes, i), 0)%uint64(len(contract.MastersOfRecord))]
}

// controller returns controller c (0 primary, 1 secondary, 2 unlisted) of
// domain d.
func (g *Generator) controller(d, c int) string {
	switch c {
	case 0:
		return "ctl-" + g.domains[d].name + "-a"
	case 1:
		return "ctl-" + g.domains[d].name + "-b"
	}
	return "ctl-shadow-" + g.domains[d].name
}

// relay returns node i's relay_id ("" = direct).
func (g *Generator) relay(i int) string {
	d := i / g.per[famNodes]
	n := g.hash(tagRelay, rid(famNodes, i), 0) % 3
	if n == 0 {
		return ""
	}
	return "relay-" + g.domains[d].name + "-" + strconv.FormatUint(n, 10)
}

// tier returns a resource's tier tag value.
func (g *Generator) tier(f, i int) string {
	return tiers[g.hash(tagTier, rid(f, i), 0)%uint64(len(tiers))]
}

// bootAt returns when node i's agent started (uptime_s counts from it).
func (g *Generator) bootAt(i int) time.Time {
	return g.cfg.Start.Add(-time.Hour - time.Duration(g.hash(tagBoot, rid(famNodes, i), 0)%(14*24*3600))*time.Second)
}

// intents returns the lifecycle_intent of node i's record version 1 and of
// its version 2 sent in revokeRound ("" = none, no version 2 when v2 is "").
// An intent of "" in version 1 means no field; ACTIVE nodes write it
// explicitly or leave it out by a hash.
func (g *Generator) intents(i int) (v1, v2 string) {
	switch g.roles[i] {
	case RoleProvisioning:
		return string(contract.IntentProvisioning), ""
	case RoleEnrolled:
		return string(contract.IntentProvisioning), string(contract.IntentEnrolled)
	case RoleDecommissioning:
		return "", string(contract.IntentDecommissioning)
	case RoleRetired:
		return string(contract.IntentDecommissioning), string(contract.IntentRetired)
	}
	if g.hash(tagIntent, rid(famNodes, i), 0)%2 == 0 {
		return string(contract.IntentActive), ""
	}
	return "", ""
}

// hbSpec is one heartbeat of the plan: what the emitter writes and the
// truth reads.
type hbSpec struct {
	at          time.Time
	round, slot int
	clone       int // 1: the second host of a cloned identity
	agent       string
	certOK      bool
	updatePath  string
	health      string
	rtt, loss   int64
	bandwidth   int64
	backlog     int64
	behind      int64
	replay      bool
	controller  string
	artifactID  string
	digest      string
	reported    string
	relay       string
	bundle      string // policy_bundle_id ("" none)
	uptime      int64
	coreEnabled bool
}

// heartbeats returns node i's heartbeats of round r in emission order:
// slot 0 (and a clone's second host) with the round's observations, then
// slots 1..3 after the round's usage. The node must be active.
func (g *Generator) heartbeats(i, r int, out []hbSpec) []hbSpec {
	out = out[:0]
	nk := g.nodes[i]
	role := g.roles[i]
	if nk == NodeDisconnected && r > 0 {
		return out
	}
	rs := g.roundStart(r)
	var slots []int
	switch role {
	case RoleReturn, RoleReturnQuarantined:
		switch r {
		case 0:
			slots = []int{0, 2}
		case 1:
		case 2:
			slots = []int{0, 1, 2}
		default:
			slots = []int{0}
		}
	case RoleSplitBrain:
		slots = []int{0, 3}
	case RoleSplitBrainResolved:
		if r == 0 {
			slots = []int{0, 3}
		} else {
			slots = []int{0}
		}
	default:
		slots = []int{0}
	}
	for _, s := range slots {
		at := rs.Add(g.offset(tagHBOffset, famNodes, i, r, g.cfg.ObservationSpread))
		if s > 0 {
			at = rs.Add(time.Duration(s)*time.Minute + g.offset(tagMid, famNodes, i, r*numSlots+s, g.cfg.ObservationSpread))
		}
		out = append(out, g.hbSpec(i, r, s, 0, at))
		if s == 0 && nk == NodeClonedIdentity {
			at2 := rs.Add(g.offset(tagHBOffset, famNodes, i, r+1<<20, g.cfg.ObservationSpread))
			out = append(out, g.hbSpec(i, r, 0, 1, at2))
		}
	}
	return out
}

// hbSpec fills one heartbeat of node i.
func (g *Generator) hbSpec(i, r, slot, clone int, at time.Time) hbSpec {
	nk := g.nodes[i]
	role := g.roles[i]
	d := i / g.per[famNodes]
	link := g.hash(tagLink, rid(famNodes, i), uint64(r))
	h := hbSpec{at: at, round: r, slot: slot, clone: clone, agent: agentVersion, certOK: nk != NodeCertMismatch,
		updatePath: string(contract.UpdatePathNone), health: string(contract.HealthOK)}
	if nk == NodeAgentOutdated {
		h.agent, h.updatePath = outdatedAgentVersion, string(contract.UpdatePathSelfUpdate)
	}
	h.rtt, h.loss = 10+int64(link%70), 0
	if nk == NodeDegraded {
		h.health = string(contract.HealthDegraded)
		h.rtt, h.loss = 300+int64(link%600), 5+int64(link>>20%15)
	}
	h.bandwidth = 100000 + int64(link>>32%900000)
	if nk == NodeReplaying {
		h.backlog, h.behind, h.replay = 500+int64(link>>8%50000), 60+int64(link>>40%3540), true
	}
	if !g.cfg.Core.Enabled {
		return h
	}
	h.coreEnabled = true
	h.controller = g.controller(d, 0)
	h.relay = g.relay(i)
	h.uptime = int64(at.Sub(g.bootAt(i)) / time.Second)
	b := g.nodeBundle(i)
	art := artStable
	if b >= 0 {
		h.bundle = bundleIDs[b]
		art = bundleArtifact[b]
	}
	old := false // runs pb-stable's version while its bundle wants another
	switch role {
	case RoleReturn, RoleReturnQuarantined:
		if r == 2 && slot <= 1 {
			h.replay = true
			h.backlog = 2000 + int64(link>>8%20000)
			h.behind = 600 + int64(link>>40%600)
		}
	case RoleRevoked:
		art = artRevoked
	case RoleSplitBrain, RoleSplitBrainResolved:
		if slot == 3 {
			h.controller = g.controller(d, 1)
		}
	case RoleUnlistedController:
		h.controller = g.controller(d, 2)
	case RoleBehind:
		old = true
	case RoleUpdating, RoleCanaryUpdating:
		old, h.updatePath = true, string(contract.UpdatePathSelfUpdate)
	case RoleUpdateFailed:
		old, h.updatePath, h.health = true, string(contract.UpdatePathSelfUpdate), string(contract.HealthDegraded)
	case RoleUpdateCompletes:
		if r == 0 {
			old, h.updatePath = true, string(contract.UpdatePathSelfUpdate)
		}
	}
	if old {
		art = artStable
	}
	h.artifactID, h.digest, h.reported = artifactIDs[art], g.artifactDigest(art), artifactVersions[art]
	switch {
	case role == RoleUnknownArtifact:
		h.artifactID = sideloadArtifact
		h.digest = string(appendFingerprint(nil, g.hash(tagArtifact, rid(famNodes, i), 7)))
	case role == RoleDigestMismatch, role == RoleReturnQuarantined && r >= 2:
		h.digest = string(appendFingerprint(nil, g.hash(tagArtifact, rid(famNodes, i), 9)))
	}
	return h
}

// nodeID returns node i's node_id.
func (g *Generator) nodeID(i int) string {
	e := emitter{g: g}
	return string(e.appendProviderID(nil, famNodes, i))
}
