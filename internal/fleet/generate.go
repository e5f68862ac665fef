package fleet

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
)

// Phase is the part of the timeline an event belongs to.
type Phase uint8

// Phases.
const (
	PhaseRecords Phase = iota // platform records before round 0
	PhaseRound                // a scan round (Event.Round)
)

func (p Phase) String() string {
	if p == PhaseRecords {
		return "records"
	}
	return "round"
}

// Event is one generated event. Line and Key alias buffers of the generator
// and are valid only until the callback returns; copy them to keep them.
type Event struct {
	Line       []byte    // the contract envelope as one JSON object, no trailing newline
	Key        []byte    // Kafka key (contract.KeyOf of the payload)
	Type       string    // event_type
	OccurredAt time.Time // occurred_at
	Phase      Phase     // records or round
	Round      int       // scan round, -1 in PhaseRecords
	Redelivery bool      // an exact byte copy of an earlier event
}

// Source is anything that streams events in order, such as *Generator.
type Source interface {
	Emit(fn func(*Event) error) error
}

// Emit produces the whole stream in order, calling fn for each event. It
// stops at the first error fn returns and returns it. Every call produces
// the same bytes.
func (g *Generator) Emit(fn func(*Event) error) error {
	e := &emitter{
		g:     g,
		fn:    fn,
		redo:  rand.New(rand.NewPCG(uint64(g.cfg.Seed), 0x13198a2e03707344)),
		usage: g.newUsageWalker(),
		line:  make([]byte, 0, 1024),
		key:   make([]byte, 0, 128),
	}
	e.recSeq = make([]uint64, len(g.domains))
	for f := range families {
		e.scanSeq[f] = make([]uint64, len(g.domains))
		e.meterSeq[f] = make([]uint64, len(g.domains))
	}
	return e.run()
}

// pending is a redelivery waiting to be emitted.
type pending struct {
	line, key []byte
	typ       string
	at        time.Time
	due       uint64 // emit once this many originals have been emitted
}

// emitter is the state of one Emit call.
type emitter struct {
	g     *Generator
	fn    func(*Event) error
	redo  *rand.Rand // redelivery decisions
	usage *usageWalker

	ev      Event
	line    []byte
	key     []byte
	scratch []byte
	counter uint64 // events emitted, ids derive from it
	origs   uint64 // original (not redelivered) events emitted
	queue   []pending
	free    []pending // recycled buffers

	recSeq   []uint64
	scanSeq  [len(families)][]uint64
	meterSeq [len(families)][]uint64
	markSeq  [len(families)]uint64

	ledgerQ   []usageRec // the round's rated usage, for ledger postings
	ledgerSeq uint64

	hbs         []hbSpec // scratch of heartbeats
	badKind     bool     // the next node record carries an unknown node_kind
	registrySeq uint64
}

func (e *emitter) run() error {
	g := e.g
	e.ev.Phase, e.ev.Round = PhaseRecords, -1
	if g.cfg.Core.Enabled {
		if err := e.registry(); err != nil {
			return err
		}
	}
	for f := range families {
		for i, k := range g.kinds[f] {
			if k.hasRecord() {
				v1, _ := g.recordTimes(f, i)
				if err := e.record(f, i, 1, v1, corrRecordsV1); err != nil {
					return err
				}
			}
		}
	}
	if g.cfg.Core.Enabled && g.cfg.Core.BadInput && g.badNode >= 0 {
		_, v2 := g.recordTimes(famNodes, g.badNode)
		if err := e.badRecord(g.badNode, v2); err != nil {
			return err
		}
	}
	for f := range families {
		for i, k := range g.kinds[f] {
			if k == KindOrphanDeleted || g.flags[f][i]&flagUpdated != 0 {
				_, v2 := g.recordTimes(f, i)
				if err := e.record(f, i, 2, v2, corrRecordsV2); err != nil {
					return err
				}
			}
		}
	}
	if err := e.flush(); err != nil {
		return err
	}
	for r := 0; r < g.cfg.Rounds; r++ {
		if err := e.round(r); err != nil {
			return err
		}
	}
	return nil
}

// replayRound is the round in which late version-1 replays are sent.
func (g *Generator) replayRound() int { return min(1, g.cfg.Rounds-1) }

func (e *emitter) round(r int) error {
	g := e.g
	e.ev.Phase, e.ev.Round = PhaseRound, r
	rs := g.roundStart(r)
	if g.cfg.Core.Enabled && r == g.revokeRound() {
		if err := e.artifact(artRevoked, true, rs, corrRevoke); err != nil {
			return err
		}
		for i := range g.kinds[famNodes] {
			if _, v2 := g.intents(i); v2 != "" {
				if err := e.record(famNodes, i, 2, rs, corrRecordsIntent); err != nil {
					return err
				}
			}
		}
	}
	if r == g.replayRound() {
		for f := range families {
			for i := range g.kinds[f] {
				if g.flags[f][i]&flagReplayed != 0 {
					v1, _ := g.recordTimes(f, i)
					if err := e.record(f, i, 1, v1, corrRecordsReplay); err != nil {
						return err
					}
				}
			}
		}
	}
	for i, k := range g.kinds[famNodes] {
		if !k.active() {
			continue
		}
		e.hbs = g.heartbeats(i, r, e.hbs)
		for j := range e.hbs {
			if e.hbs[j].slot == 0 {
				if err := e.heartbeat(i, &e.hbs[j]); err != nil {
					return err
				}
			}
		}
		if r == 0 && i == g.badNode && g.cfg.Core.Enabled && g.cfg.Core.BadInput && len(e.hbs) > 0 {
			if err := e.badHeartbeat(i, e.hbs[0]); err != nil {
				return err
			}
		}
	}
	for f := range families {
		for i, k := range g.kinds[f] {
			if k.observed() {
				if err := e.observation(f, i, r); err != nil {
					return err
				}
			}
		}
	}
	if err := e.usage.round(r, e.usageEvent); err != nil {
		return err
	}
	if err := e.ledgerRound(); err != nil {
		return err
	}
	for slot := 1; slot < numSlots; slot++ {
		for i, k := range g.kinds[famNodes] {
			if !k.active() || g.roles[i] == RoleNone {
				continue
			}
			e.hbs = g.heartbeats(i, r, e.hbs)
			for j := range e.hbs {
				if e.hbs[j].slot == slot {
					if err := e.heartbeat(i, &e.hbs[j]); err != nil {
						return err
					}
				}
			}
		}
	}
	for f := range families {
		if err := e.marker(f, r); err != nil {
			return err
		}
	}
	return e.flush()
}

// Correlation ids of record events.
const (
	corrRecordsV1     = "platform-sync-v1"
	corrRecordsV2     = "platform-sync-v2"
	corrRecordsReplay = "platform-sync-replay"
)

// begin starts an envelope in e.line; the payload object follows.
// Every generated identifier is plain ASCII without quotes or backslashes
// by construction, so identifiers are appended without escaping.
func (e *emitter) begin(typ string, producer []byte, seq uint64, at time.Time, corr string) {
	b := e.line[:0]
	b = append(b, `{"event_id":"`...)
	b = appendULID(b, uint64(at.UnixMilli()), e.g.seedMix, e.counter)
	b = append(b, `","event_type":"`...)
	b = append(b, typ...)
	b = append(b, `","schema_version":1,"producer":"`...)
	b = append(b, producer...)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"occurred_at":`...)
	b = appendTime(b, at)
	if len(corr) > 0 {
		b = append(b, `,"correlation_id":"`...)
		b = append(b, corr...)
		b = append(b, '"')
	}
	b = append(b, `,"environment":"`...)
	b = append(b, e.g.cfg.Environment...)
	b = append(b, `","payload":{`...)
	e.line = b
	e.ev.Type = typ
	e.ev.OccurredAt = at
}

// send closes the envelope and emits it, then any redeliveries due.
func (e *emitter) send() error {
	e.line = append(e.line, '}', '}')
	e.counter++
	e.origs++
	e.ev.Line, e.ev.Key, e.ev.Redelivery = e.line, e.key, false
	if err := e.fn(&e.ev); err != nil {
		return err
	}
	if e.g.cfg.DuplicateRate > 0 && e.redo.Float64() < e.g.cfg.DuplicateRate {
		p := e.alloc()
		p.line = append(p.line[:0], e.line...)
		p.key = append(p.key[:0], e.key...)
		p.typ, p.at = e.ev.Type, e.ev.OccurredAt
		p.due = e.origs + 1 + uint64(e.redo.IntN(64))
		e.queue = append(e.queue, p)
	}
	return e.drain(false)
}

func (e *emitter) alloc() pending {
	if n := len(e.free); n > 0 {
		p := e.free[n-1]
		e.free = e.free[:n-1]
		return p
	}
	return pending{}
}

// drain emits queued redeliveries that are due (all when all is set).
func (e *emitter) drain(all bool) error {
	for j := 0; j < len(e.queue); {
		p := e.queue[j]
		if !all && p.due > e.origs {
			j++
			continue
		}
		e.queue = append(e.queue[:j], e.queue[j+1:]...)
		e.counter++
		e.ev.Line, e.ev.Key, e.ev.Type, e.ev.OccurredAt, e.ev.Redelivery = p.line, p.key, p.typ, p.at, true
		if err := e.fn(&e.ev); err != nil {
			return err
		}
		e.free = append(e.free, p)
	}
	return nil
}

// flush emits every queued redelivery: redeliveries stay in their round.
func (e *emitter) flush() error { return e.drain(true) }

// appendProviderID appends "<short>-<domain>-<nnnnn>".
func (e *emitter) appendProviderID(b []byte, f, i int) []byte {
	per := e.g.per[f]
	b = append(b, families[f].short...)
	b = append(b, '-')
	b = append(b, e.g.domains[i/per].name...)
	b = append(b, '-')
	return appendPadded(b, i%per+1, 5)
}

func (e *emitter) appendRecordID(b []byte, f, i int) []byte {
	b = append(b, "rec-"...)
	return e.appendProviderID(b, f, i)
}

func (e *emitter) setIdentityKey(f, i int) {
	e.key = append(e.key[:0], families[f].provider...)
	e.key = append(e.key, '/')
	e.key = e.appendProviderID(e.key, f, i)
}

func (e *emitter) appendRoute(b []byte, f, i int, wrong bool) []byte {
	per := e.g.per[f]
	dom := e.g.domains[i/per].name
	if f == famApps {
		if wrong {
			b = append(b, "stale-"...)
		}
		b = e.appendProviderID(b, f, i)
		b = append(b, '.')
		b = append(b, dom...)
		return append(b, ".apps.internal"...)
	}
	pool := e.g.hash(tagRoute, rid(f, i), 0) % 8
	if wrong {
		pool = (pool + 1) % 8
	}
	b = append(b, "pool-"...)
	b = strconv.AppendUint(b, pool, 10)
	b = append(b, '.')
	b = append(b, dom...)
	return append(b, ".models.internal"...)
}

// record emits version v of resource (f, i)'s platform record.
func (e *emitter) record(f, i int, v int64, at time.Time, corr string) error {
	g := e.g
	fam := &families[f]
	d := i / g.per[f]
	dom := &g.domains[d]
	k := g.kinds[f][i]
	old := v == 1 && g.flags[f][i]&flagUpdated != 0
	e.recSeq[d]++
	e.scratch = append(e.scratch[:0], g.recProducers[d]...)
	e.begin(contract.TypePlatformRecord, e.scratch, e.recSeq[d], at, corr)
	b := e.line
	b = append(b, `"record_type":"`...)
	b = append(b, fam.recordType...)
	b = append(b, `","record_id":"`...)
	b = e.appendRecordID(b, f, i)
	b = append(b, `","record_version":`...)
	b = strconv.AppendInt(b, v, 10)
	b = append(b, `,"resource_family":"`...)
	b = append(b, fam.name...)
	b = append(b, `","product_id":"`...)
	b = append(b, fam.productID...)
	b = append(b, `","owning_domain":"`...)
	b = append(b, fam.owningDomain...)
	b = append(b, `","owning_package":"`...)
	b = append(b, fam.owningPackage...)
	b = append(b, `","domain_id":"`...)
	b = append(b, dom.id...)
	b = append(b, `","tags":["domain:`...)
	b = append(b, dom.name...)
	b = append(b, `","tenant:`...)
	b = appendTenant(b, g.tenant(f, i))
	if g.cfg.Core.Enabled {
		b = append(b, `","tier:`...)
		b = append(b, g.tier(f, i)...)
	}
	b = append(b, `"],"provider":"`...)
	b = append(b, fam.provider...)
	b = append(b, `","provider_id":"`...)
	b = e.appendProviderID(b, f, i)
	b = append(b, `","expected_state":"`...)
	if k == KindOrphanReleased {
		b = append(b, "released"...)
	} else {
		b = append(b, fam.liveState...)
	}
	b = append(b, `","expected_version":"`...)
	gen := genCurrent
	if old {
		gen = genOld
	}
	b = g.appendVersion(b, f, i, gen)
	b = append(b, `","deleted":`...)
	b = strconv.AppendBool(b, k == KindOrphanDeleted && v == 2)
	if fam.hasQuota {
		q := g.quotaGB(i)
		if old {
			q /= 20 // below any healthy usage: applying the stale version would raise a finding
		}
		b = append(b, `,"quota":"`...)
		b = strconv.AppendInt(b, q, 10)
		b = append(b, '"')
	}
	if fam.hasRoute {
		b = append(b, `,"route_target":"`...)
		b = e.appendRoute(b, f, i, false)
		b = append(b, '"')
	}
	if f == famNodes {
		b = append(b, `,"expected_agent_version":"`...)
		b = append(b, agentVersion...)
		b = append(b, `","cert_issuer_fingerprint":"`...)
		b = append(b, dom.certFP...)
		b = append(b, `","ingress_trust_fingerprint":"`...)
		b = append(b, dom.ingressFP...)
		b = append(b, '"')
		if g.cfg.Core.Enabled {
			b = e.appendNodeCore(b, i, v)
		}
	}
	e.line = b
	e.setIdentityKey(f, i)
	return e.send()
}

// Node-agent versions.
const (
	agentVersion         = "1.14.2"
	outdatedAgentVersion = "1.12.0"
)

func appendTenant(b []byte, t int) []byte {
	b = append(b, "tenant-"...)
	return appendPadded(b, t+1, 3)
}

// observation emits resource (f, i)'s observation of round r.
func (e *emitter) observation(f, i, r int) error {
	g := e.g
	fam := &families[f]
	d := i / g.per[f]
	k := g.kinds[f][i]
	at := g.roundStart(r).Add(g.offset(tagObsOffset, f, i, r, g.cfg.ObservationSpread))
	e.scanSeq[f][d]++
	e.scratch = append(e.scratch[:0], g.scanProducers[f][d]...)
	e.begin(contract.TypeProviderObservation, e.scratch, e.scanSeq[f][d], at, g.scanIDs[f][r])
	b := e.line
	b = append(b, `"provider":"`...)
	b = append(b, fam.provider...)
	b = append(b, `","provider_id":"`...)
	b = e.appendProviderID(b, f, i)
	b = append(b, `","resource_family":"`...)
	b = append(b, fam.name...)
	b = append(b, `","observed_state":"`...)
	if k == KindStaleState || (k == KindStaleResolved && r == 0) {
		b = append(b, fam.staleState...)
	} else {
		b = append(b, fam.liveState...)
	}
	b = append(b, `","observed_version":"`...)
	gen := genCurrent
	if k == KindStaleVersion {
		gen = genWrong
	}
	b = g.appendVersion(b, f, i, gen)
	b = append(b, '"')
	switch k {
	case KindOrphanUnowned:
	case KindOwnerRef:
		b = append(b, `,"owner_ref":"`...)
		b = e.appendRecordID(b, f, g.otherRecord(f, i))
		b = append(b, '"')
	default:
		b = append(b, `,"owner_ref":"`...)
		b = e.appendRecordID(b, f, i)
		b = append(b, '"')
	}
	if fam.hasQuota {
		b = append(b, `,"usage":"`...)
		b = appendFixed(b, g.usageMilli(i, r, k == KindQuota), 3)
		b = append(b, '"')
	}
	if fam.hasRoute {
		b = append(b, `,"route_target":"`...)
		b = e.appendRoute(b, f, i, k == KindRoute)
		b = append(b, '"')
	}
	e.line = b
	e.setIdentityKey(f, i)
	return e.send()
}

// otherRecord returns the index of the next resource of family f after i
// that has a record: the owner an owner_ref resource wrongly names.
func (g *Generator) otherRecord(f, i int) int {
	n := len(g.kinds[f])
	for j := 1; j < n; j++ {
		o := (i + j) % n
		if g.kinds[f][o].hasRecord() {
			return o
		}
	}
	panic("BUG: owner_ref resource without another record")
}

// heartbeat emits node i's heartbeat h.
func (e *emitter) heartbeat(i int, h *hbSpec) error {
	g := e.g
	dom := &g.domains[i/g.per[famNodes]]
	e.scratch = append(e.scratch[:0], "nodeagent-"...)
	e.scratch = e.appendProviderID(e.scratch, famNodes, i)
	if h.clone == 1 {
		e.scratch = append(e.scratch, "-h2"...)
	}
	e.begin(contract.TypeHeartbeat, e.scratch, uint64(h.round*numSlots+h.slot+1), h.at, "")
	b := e.line
	b = append(b, `"node_id":"`...)
	b = e.appendProviderID(b, famNodes, i)
	b = append(b, `","agent_version":"`...)
	b = append(b, h.agent...)
	b = append(b, `","cert_issuer_fingerprint":"`...)
	if !h.certOK {
		b = appendFingerprint(b, g.hash(tagCert, uint64(i/g.per[famNodes]), 1+rid(famNodes, i)))
	} else {
		b = append(b, dom.certFP...)
	}
	b = append(b, `","ingress_trust_fingerprint":"`...)
	b = append(b, dom.ingressFP...)
	b = append(b, `","host_fingerprint":"`...)
	b = appendFingerprint(b, g.hash(tagHost, rid(famNodes, i), uint64(h.clone)))
	b = append(b, `","update_path":"`...)
	b = append(b, h.updatePath...)
	b = append(b, `","terminal_stream_probe":"`...)
	b = append(b, contract.ProbePassed...)
	b = append(b, `","workload_impact":"`...)
	b = append(b, contract.ImpactNoneObserved...)
	b = append(b, `","health":"`...)
	b = append(b, h.health...)
	b = append(b, `","rtt_ms":`...)
	b = strconv.AppendInt(b, h.rtt, 10)
	b = append(b, `,"loss_pct":`...)
	b = strconv.AppendInt(b, h.loss, 10)
	b = append(b, `,"bandwidth_kbps":`...)
	b = strconv.AppendInt(b, h.bandwidth, 10)
	b = append(b, `,"backlog_messages":`...)
	b = strconv.AppendInt(b, h.backlog, 10)
	b = append(b, `,"seconds_behind":`...)
	b = strconv.AppendInt(b, h.behind, 10)
	b = append(b, `,"replay_required":`...)
	b = strconv.AppendBool(b, h.replay)
	if h.coreEnabled {
		b = appendStringField(b, "reported_version", h.reported)
		b = appendStringField(b, "artifact_id", h.artifactID)
		b = appendStringField(b, "artifact_digest", h.digest)
		b = appendStringField(b, "controller_id", h.controller)
		b = appendStringField(b, "relay_id", h.relay)
		b = append(b, `,"uptime_s":`...)
		b = strconv.AppendInt(b, h.uptime, 10)
		b = appendStringField(b, "policy_bundle_id", h.bundle)
	}
	e.line = b
	e.key = append(e.key[:0], contract.ProviderMAAS...)
	e.key = append(e.key, '/')
	e.key = e.appendProviderID(e.key, famNodes, i)
	return e.send()
}

// marker emits family f's provider.scan_completed of round r.
func (e *emitter) marker(f, r int) error {
	g := e.g
	rs := g.roundStart(r)
	at := rs.Add(g.cfg.ScanDuration + time.Duration(f)*markerStep)
	e.markSeq[f]++
	e.scratch = append(e.scratch[:0], g.markProducers[f]...)
	scanID := g.scanIDs[f][r]
	e.begin(contract.TypeScanCompleted, e.scratch, e.markSeq[f], at, scanID)
	b := e.line
	b = append(b, `"provider":"`...)
	b = append(b, families[f].provider...)
	b = append(b, `","scan_id":"`...)
	b = append(b, scanID...)
	b = append(b, `","scan_started_at":`...)
	b = appendTime(b, rs)
	e.line = b
	e.key = append(e.key[:0], families[f].provider...)
	e.key = append(e.key, "/scan/"...)
	e.key = append(e.key, scanID...)
	return e.send()
}

// usageEvent emits one usage.recorded event.
func (e *emitter) usageEvent(u *usageRec) error {
	g := e.g
	e.queueLedger(u)
	d := u.i / g.per[u.f]
	e.meterSeq[u.f][d]++
	src := g.meterProducers[u.f][d]
	e.scratch = append(e.scratch[:0], src...)
	e.begin(contract.TypeUsageRecorded, e.scratch, e.meterSeq[u.f][d], u.at, "")
	b := e.line
	b = append(b, `"usage_id":"`...)
	b = e.appendMeteringRef(b, u, src)
	b = append(b, `","unit_id":"`...)
	b = append(b, u.unit...)
	b = append(b, `","quantity":"`...)
	if u.corrected {
		b = appendFixed(b, u.micros+correctionMicros, 6)
	} else {
		b = appendFixed(b, u.micros, 6)
	}
	b = append(b, `","product_id":"`...)
	b = append(b, families[u.f].productID...)
	b = append(b, `","tenant_id":"`...)
	b = appendTenant(b, u.tenant)
	b = append(b, `","project_id":"`...)
	b = appendTenant(b, u.tenant)
	b = append(b, "-prj-"...)
	b = strconv.AppendInt(b, int64(g.hash(tagTenant, rid(u.f, u.i), 1)%4+1), 10)
	b = append(b, `","record_id":"`...)
	b = e.appendRecordID(b, u.f, u.i)
	b = append(b, `","window_start":`...)
	b = appendTime(b, u.windowStart)
	b = append(b, `,"window_end":`...)
	b = appendTime(b, u.windowEnd)
	e.line = b
	return e.send()
}

// appendMeteringRef appends u's usage_id value and its metering_source and
// metering_id fields, and keys the record by metering_source/metering_id:
// a usage record and its ledger entry name the usage alike and land on
// the same partition.
func (e *emitter) appendMeteringRef(b []byte, u *usageRec, src string) []byte {
	b = e.appendUsageID(b, u)
	b = append(b, `","metering_source":"`...)
	b = append(b, src...)
	b = append(b, `","metering_id":"`...)
	mStart := len(b)
	b = e.appendMeteringID(b, u)
	e.key = append(e.key[:0], src...)
	e.key = append(e.key, '/')
	e.key = append(e.key, b[mStart:]...)
	return b
}

func (e *emitter) appendMeteringID(b []byte, u *usageRec) []byte {
	b = e.appendProviderID(b, u.f, u.i)
	b = append(b, ":r"...)
	b = strconv.AppendInt(b, int64(u.r), 10)
	b = append(b, ':')
	return strconv.AppendInt(b, int64(u.k), 10)
}

func (e *emitter) appendUsageID(b []byte, u *usageRec) []byte {
	b = append(b, "usg-"...)
	b = append(b, e.g.runTag...)
	b = append(b, '-')
	b = e.appendMeteringID(b, u)
	if u.duplicate {
		b = append(b, "-dup"...)
	}
	return b
}
