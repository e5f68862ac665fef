package fleet

import (
	"strconv"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// appendStringField appends `,"name":"v"`, or nothing when v is empty.
func appendStringField(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":"`...)
	b = append(b, v...)
	return append(b, '"')
}

// registry emits the registry: every artifact (none revoked yet), every
// policy bundle and, with Core.BadInput, a bundle naming an unknown
// artifact. They precede every record, so every bundle's artifact and
// every node's bundle are known when the records and heartbeats arrive.
func (e *emitter) registry() error {
	g := e.g
	at := g.registryAt()
	for a := 0; a < numArtifacts; a++ {
		if err := e.artifact(a, false, at, corrRegistry); err != nil {
			return err
		}
		at = at.Add(time.Millisecond)
	}
	for b := 0; b < numBundles; b++ {
		if err := e.bundle(bundleIDs[b], artifactIDs[bundleArtifact[b]], artifactVersions[bundleArtifact[b]],
			g.bundleDomains(b), g.bundleDeadline(b), at); err != nil {
			return err
		}
		at = at.Add(time.Millisecond)
	}
	if g.cfg.Core.BadInput {
		return e.bundle(badBundle, badBundleArtifact, "2026.11.2", nil, g.bundleDeadline(bundleCanary), at)
	}
	return nil
}

// artifact emits the fleet.artifact of artifact a.
func (e *emitter) artifact(a int, revoked bool, at time.Time, corr string) error {
	g := e.g
	e.registrySeq++
	e.scratch = append(e.scratch[:0], registryProducer...)
	e.begin(contract.TypeArtifact, e.scratch, e.registrySeq, at, corr)
	b := e.line
	b = append(b, `"artifact_id":"`...)
	b = append(b, artifactIDs[a]...)
	b = append(b, `","version":"`...)
	b = append(b, artifactVersions[a]...)
	b = append(b, `","digest":"`...)
	b = append(b, g.artifactDigest(a)...)
	b = append(b, `","signed_by":"release-signer-2026","sbom_ref":"sbom://agent/`...)
	b = append(b, artifactVersions[a]...)
	b = append(b, `","provenance_ref":"slsa://builds/agent-`...)
	b = append(b, artifactVersions[a]...)
	b = append(b, `","revoked":`...)
	b = strconv.AppendBool(b, revoked)
	e.line = b
	e.key = append(e.key[:0], "artifact/"...)
	e.key = append(e.key, artifactIDs[a]...)
	return e.send()
}

// bundle emits one fleet.policy_bundle.
func (e *emitter) bundle(id, artifactID, target string, domains []string, deadline, at time.Time) error {
	e.registrySeq++
	e.scratch = append(e.scratch[:0], registryProducer...)
	e.begin(contract.TypePolicyBundle, e.scratch, e.registrySeq, at, corrRegistry)
	b := e.line
	b = append(b, `"policy_bundle_id":"`...)
	b = append(b, id...)
	b = append(b, `","target_version":"`...)
	b = append(b, target...)
	b = append(b, `","artifact_id":"`...)
	b = append(b, artifactID...)
	b = append(b, '"')
	if len(domains) > 0 {
		b = append(b, `,"domains":[`...)
		for j, d := range domains {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, d...)
			b = append(b, '"')
		}
		b = append(b, ']')
	}
	b = append(b, `,"deadline":`...)
	b = appendTime(b, deadline)
	e.line = b
	e.key = append(e.key[:0], "bundle/"...)
	e.key = append(e.key, id...)
	return e.send()
}

// appendNodeCore appends the fleet-core fields of version v of node i's
// record: node_kind, lifecycle_intent, authority and desired.
func (e *emitter) appendNodeCore(b []byte, i int, v int64) []byte {
	g := e.g
	d := i / g.per[famNodes]
	kind := string(g.nodeKind(i))
	if e.badKind {
		kind = badNodeKind
	}
	b = appendStringField(b, "node_kind", kind)
	v1, v2 := g.intents(i)
	intent := v1
	if v == 2 && v2 != "" {
		intent = v2
	}
	b = appendStringField(b, "lifecycle_intent", intent)
	b = append(b, `,"authority":{"master_of_record":"`...)
	b = append(b, g.master(i)...)
	b = append(b, `","controller_ids":["`...)
	b = append(b, g.controller(d, 0)...)
	b = append(b, `","`...)
	b = append(b, g.controller(d, 1)...)
	b = append(b, `"]}`...)
	if bd := g.nodeBundle(i); bd >= 0 {
		b = append(b, `,"desired":{"policy_bundle_id":"`...)
		b = append(b, bundleIDs[bd]...)
		b = append(b, `","target_version":"`...)
		b = append(b, artifactVersions[bundleArtifact[bd]]...)
		b = append(b, `","maintenance_window":"`...)
		b = append(b, []string{"sun 02:00-04:00", "sat 01:00-03:00", "daily 03:00-04:00"}[g.hash(tagTier, rid(famNodes, i), 1)%3]...)
		b = append(b, `","requires_online":`...)
		b = strconv.AppendBool(b, g.hash(tagTier, rid(famNodes, i), 2)%2 == 0)
		b = append(b, '}')
	}
	return b
}

// badRecord emits a record of node i with an unknown node_kind: the
// gateway rejects it (invalid_field), so it changes nothing.
func (e *emitter) badRecord(i int, at time.Time) error {
	e.badKind = true
	defer func() { e.badKind = false }()
	return e.record(famNodes, i, badRecordVersion, at, corrRecordsV2)
}

// badRecordVersion is the record_version of the bad record: above every
// real version, so applying it by mistake would show.
const badRecordVersion = 9

// badHeartbeat emits, after node i's first heartbeat h, a heartbeat a
// second older naming a policy bundle the registry does not have: the
// joiner quarantines it (unknown_policy_bundle). Being older, it would
// change no evidence even if it were applied.
func (e *emitter) badHeartbeat(i int, h hbSpec) error {
	h.at = h.at.Add(-time.Second)
	h.slot = 1
	h.bundle = badHeartbeatBundle
	return e.heartbeat(i, &h)
}
