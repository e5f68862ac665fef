package sink

import (
	"encoding/binary"
	"math"
	"time"
	"unsafe"

	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/readmodel"
)

// NodeRows holds the node_agent_status rows of a batch, at most one per
// node: a node that changes again in the round overwrites its row (Set).
//
// A row is kept packed, with no pointer in it: its strings are copied
// into one byte array of the batch and referenced by offset and length,
// its times are Unix nanoseconds, its recent events a ring of numbers. A
// nodeagent.Status is 888 bytes holding 37 pointers; a packed row is
// about 430 bytes, and the collector never scans it. A catch-up round of
// the 10M fleet holds a row for most of its 266,652 nodes, and the row
// of the round being written is held beside the round being built.
//
// A string is copied once per batch where it can be told cheaply that
// it was copied before: a row that overwrites a node's row keeps the
// strings that did not change, and a small cache by the string's address
// finds the values many nodes share (states, versions, domains), which
// the tracker interns so that they share their bytes; a hit compares
// the bytes, so an address reused for another value is only a miss.
type NodeRows struct {
	rows  Rows[nodeRow]
	bytes []byte
	// coords are the (topics, partition) of the rows' recent events
	// (a batch's rows are of one partition: one entry).
	coords []recentCoords
	cache  *[nodeCacheSize]copied
}

type recentCoords struct {
	topics    []string
	partition int32
}

// ref is where a string is in NodeRows.bytes.
type ref struct{ off, n uint32 }

// copied is an entry of the cache: the address and length of a string
// copied into the batch, and where its copy is.
type copied struct {
	addr uintptr
	at   ref
}

const nodeCacheBits = 10
const nodeCacheSize = 1 << nodeCacheBits

// The string columns of a row, in the order of nodeRow.strs.
const (
	nsNodeID = iota
	nsDomainID
	nsOwningDomain
	nsState
	nsReason
	nsUpdatePath
	nsExpectedAgentVersion
	nsObservedAgentVersion
	nsCertIssuerFingerprint
	nsIngressTrustFingerprint
	nsHostFingerprint
	nsTerminalStreamProbe
	nsWorkloadImpact
	nsHealth
	nsGate
	nsConnectivityMode
	nsNodeKind
	nsLifecycleIntent
	nsPhase
	nsLifecycleState
	nsMasterOfRecord
	nsControllerID
	nsAuthority
	nsRelayID
	nsPolicyBundleID
	nsTargetVersion
	nsReportedVersion
	nsRollout
	nsArtifactID
	nsArtifactDigest
	nsSupplyChain
	numNodeStrings
)

// nodeStrings are the Status fields of the string columns.
var nodeStrings = [numNodeStrings]func(*status) *string{
	nsNodeID:                  func(s *status) *string { return &s.NodeID },
	nsDomainID:                func(s *status) *string { return &s.DomainID },
	nsOwningDomain:            func(s *status) *string { return &s.OwningDomain },
	nsState:                   func(s *status) *string { return &s.State },
	nsReason:                  func(s *status) *string { return &s.Reason },
	nsUpdatePath:              func(s *status) *string { return &s.UpdatePath },
	nsExpectedAgentVersion:    func(s *status) *string { return &s.ExpectedAgentVersion },
	nsObservedAgentVersion:    func(s *status) *string { return &s.ObservedAgentVersion },
	nsCertIssuerFingerprint:   func(s *status) *string { return &s.CertIssuerFingerprint },
	nsIngressTrustFingerprint: func(s *status) *string { return &s.IngressTrustFingerprint },
	nsHostFingerprint:         func(s *status) *string { return &s.HostFingerprint },
	nsTerminalStreamProbe:     func(s *status) *string { return &s.TerminalStreamProbe },
	nsWorkloadImpact:          func(s *status) *string { return &s.WorkloadImpact },
	nsHealth:                  func(s *status) *string { return &s.Health },
	nsGate:                    func(s *status) *string { return &s.Gate },
	nsConnectivityMode:        func(s *status) *string { return &s.ConnectivityMode },
	nsNodeKind:                func(s *status) *string { return &s.NodeKind },
	nsLifecycleIntent:         func(s *status) *string { return &s.LifecycleIntent },
	nsPhase:                   func(s *status) *string { return &s.Phase },
	nsLifecycleState:          func(s *status) *string { return &s.LifecycleState },
	nsMasterOfRecord:          func(s *status) *string { return &s.MasterOfRecord },
	nsControllerID:            func(s *status) *string { return &s.ControllerID },
	nsAuthority:               func(s *status) *string { return &s.Authority },
	nsRelayID:                 func(s *status) *string { return &s.RelayID },
	nsPolicyBundleID:          func(s *status) *string { return &s.PolicyBundleID },
	nsTargetVersion:           func(s *status) *string { return &s.TargetVersion },
	nsReportedVersion:         func(s *status) *string { return &s.ReportedVersion },
	nsRollout:                 func(s *status) *string { return &s.Rollout },
	nsArtifactID:              func(s *status) *string { return &s.ArtifactID },
	nsArtifactDigest:          func(s *status) *string { return &s.ArtifactDigest },
	nsSupplyChain:             func(s *status) *string { return &s.SupplyChain },
}

// nodeRow is a packed row: the columns of node_agent_status (the Status
// fields that are not columns are not kept).
type nodeRow struct {
	strs                        [numNodeStrings]ref
	tags, controllers           ref // each value as a uvarint length and its bytes
	rtt, loss, bandwidth, score float64
	backlog, behind, uptime     int64
	lastSeen, phaseSince        int64 // Unix ns; zeroTime for a zero time
	version, transitions        uint64
	recent                      nodeagent.Ring
	coords                      uint16 // index in NodeRows.coords
	replay                      bool
}

// zeroTime stands for a zero time.Time in a packed row.
const zeroTime = math.MinInt64

func packTime(t time.Time) int64 {
	if t.IsZero() {
		return zeroTime
	}
	return t.UnixNano()
}

func unpackTime(ns int64) time.Time {
	if ns == zeroTime {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// NodeRowsOf returns a NodeRows holding statuses, in order.
func NodeRowsOf(statuses ...nodeagent.Status) NodeRows {
	var r NodeRows
	for i := range statuses {
		r.Append(&statuses[i])
	}
	return r
}

// Len returns the number of rows.
func (r *NodeRows) Len() int { return r.rows.Len() }

// Append adds the row of s and returns its index.
func (r *NodeRows) Append(s *nodeagent.Status) int {
	var row nodeRow
	r.pack(&row, s, false)
	return r.rows.Append(&row)
}

// Set overwrites the row at index i (below Len) with the row of s.
func (r *NodeRows) Set(i int, s *nodeagent.Status) {
	r.pack(r.rows.At(i), s, true)
}

// Status returns the row at index i as a Status: its columns' fields
// set, the others zero.
func (r *NodeRows) Status(i int) nodeagent.Status {
	row := r.rows.At(i)
	var s nodeagent.Status
	for k, field := range nodeStrings {
		*field(&s) = r.str(row.strs[k])
	}
	s.Tags, s.ControllerIDs = r.list(row.tags), r.list(row.controllers)
	s.RTTMs, s.LossPct, s.BandwidthKbps, s.AttentionScore = row.rtt, row.loss, row.bandwidth, row.score
	s.BacklogMessages, s.SecondsBehind, s.UptimeS = row.backlog, row.behind, row.uptime
	s.LastSeenAt, s.PhaseSince = unpackTime(row.lastSeen), unpackTime(row.phaseSince)
	s.Version, s.Transitions, s.ReplayRequired = row.version, row.transitions, row.replay
	c := r.coords[row.coords]
	s.Recent = nodeagent.RecentOf(row.recent, c.topics, c.partition)
	return s
}

// Statuses returns the rows as Statuses (Status), in order.
func (r *NodeRows) Statuses() []nodeagent.Status {
	out := make([]nodeagent.Status, r.Len())
	for i := range out {
		out[i] = r.Status(i)
	}
	return out
}

// Reset empties the rows, keeping their capacity.
func (r *NodeRows) Reset() {
	r.rows.Reset()
	r.bytes, r.coords = r.bytes[:0], r.coords[:0]
	if r.cache != nil {
		*r.cache = [nodeCacheSize]copied{}
	}
}

// pack writes the row of s into row; over is set when row holds the
// node's earlier row of the batch, whose unchanged strings are kept.
func (r *NodeRows) pack(row *nodeRow, s *nodeagent.Status, over bool) {
	for k, field := range nodeStrings {
		v := *field(s)
		if over && r.str(row.strs[k]) == v {
			continue
		}
		row.strs[k] = r.put(v)
	}
	if !over || !r.listIs(row.tags, s.Tags) {
		row.tags = r.putList(s.Tags)
	}
	if !over || !r.listIs(row.controllers, s.ControllerIDs) {
		row.controllers = r.putList(s.ControllerIDs)
	}
	row.rtt, row.loss, row.bandwidth, row.score = s.RTTMs, s.LossPct, s.BandwidthKbps, s.AttentionScore
	row.backlog, row.behind, row.uptime = s.BacklogMessages, s.SecondsBehind, s.UptimeS
	row.lastSeen, row.phaseSince = packTime(s.LastSeenAt), packTime(s.PhaseSince)
	row.version, row.transitions, row.replay = s.Version, s.Transitions, s.ReplayRequired
	ring, topics, partition := s.Recent.Parts()
	row.recent, row.coords = ring, r.coordsOf(topics, partition)
}

// coordsOf returns the index of (topics, partition) in r.coords.
func (r *NodeRows) coordsOf(topics []string, partition int32) uint16 {
	for i, c := range r.coords {
		if c.partition == partition && sameStrings(c.topics, topics) {
			return uint16(i)
		}
	}
	if len(r.coords) == math.MaxUint16 {
		panic("sink: node rows of too many partitions in one batch")
	}
	r.coords = append(r.coords, recentCoords{topics: topics, partition: partition})
	return uint16(len(r.coords) - 1)
}

// sameStrings reports whether a and b hold the same values; lists shared
// with the tracker compare by their first element's address first.
func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// str returns the string at at (it aliases r.bytes: valid until Reset).
func (r *NodeRows) str(at ref) string {
	if at.n == 0 {
		return ""
	}
	return unsafe.String(&r.bytes[at.off], int(at.n))
}

// put copies v into r.bytes, unless the cache finds a copy of it.
func (r *NodeRows) put(v string) ref {
	if v == "" {
		return ref{}
	}
	addr := uintptr(unsafe.Pointer(unsafe.StringData(v)))
	c := r.cached(addr, len(v))
	if c.addr == addr && c.at.n == uint32(len(v)) && r.str(c.at) == v {
		return c.at
	}
	at := r.append(v)
	*c = copied{addr: addr, at: at}
	return at
}

// cached returns the cache entry of a value at addr of length n.
func (r *NodeRows) cached(addr uintptr, n int) *copied {
	if r.cache == nil {
		r.cache = new([nodeCacheSize]copied)
	}
	return &r.cache[(uint64(addr)^uint64(n))*0x9e3779b97f4a7c15>>(64-nodeCacheBits)]
}

func (r *NodeRows) append(v string) ref {
	if len(r.bytes)+len(v) > math.MaxUint32 {
		panic("sink: node rows of a batch hold more than 4 GiB of strings")
	}
	at := ref{off: uint32(len(r.bytes)), n: uint32(len(v))}
	r.bytes = append(r.bytes, v...)
	return at
}

// putList copies l into r.bytes, each value as its length and bytes,
// unless the cache finds a copy of it: the tracker interns lists, so
// that equal lists share their array.
func (r *NodeRows) putList(l []string) ref {
	if len(l) == 0 {
		return ref{}
	}
	c := r.cached(uintptr(unsafe.Pointer(&l[0])), len(l))
	if c.addr == uintptr(unsafe.Pointer(&l[0])) && r.listIs(c.at, l) {
		return c.at
	}
	off := len(r.bytes)
	for _, v := range l {
		r.bytes = binary.AppendUvarint(r.bytes, uint64(len(v)))
		r.bytes = append(r.bytes, v...)
	}
	at := ref{off: uint32(off), n: uint32(len(r.bytes) - off)}
	*c = copied{addr: uintptr(unsafe.Pointer(&l[0])), at: at}
	return at
}

// list returns the values putList copied at at (nil for none).
func (r *NodeRows) list(at ref) []string {
	if at.n == 0 {
		return nil
	}
	var out []string
	for b := r.bytes[at.off : at.off+at.n]; len(b) > 0; {
		n, k := binary.Uvarint(b)
		out = append(out, string(b[k:k+int(n)]))
		b = b[k+int(n):]
	}
	return out
}

// listIs reports whether the list at at holds the values of l.
func (r *NodeRows) listIs(at ref, l []string) bool {
	b := r.bytes[at.off : at.off+at.n]
	for _, v := range l {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) || string(b[k:k+int(n)]) != v {
			return false
		}
		b = b[k+int(n):]
	}
	return len(b) == 0
}

// nodeView is a row as the insert of node_agent_status reads it.
type nodeView struct {
	rows *NodeRows
	row  *nodeRow
}

// nodeViews returns the rows of bs as the insert reads them, a part per
// batch.
func nodeViews(bs []*Batch) [][]nodeView {
	parts := make([][]nodeView, 0, len(bs))
	for _, b := range bs {
		if b.Nodes.Len() == 0 {
			continue
		}
		views := make([]nodeView, 0, b.Nodes.Len())
		for _, chunk := range b.Nodes.rows.All() {
			for i := range chunk {
				views = append(views, nodeView{rows: &b.Nodes, row: &chunk[i]})
			}
		}
		parts = append(parts, views)
	}
	return parts
}

// nodeStr is the string column k of a row.
func nodeStr(name string, k int) readmodel.Column[nodeView] {
	return readmodel.String(name, func(v *nodeView) string { return v.rows.str(v.row.strs[k]) })
}

var nodesTable = readmodel.NewTable("node_agent_status",
	nodeStr("node_id", nsNodeID),
	nodeStr("domain_id", nsDomainID),
	nodeStr("owning_domain", nsOwningDomain),
	nodeStr("node_agent_state", nsState),
	nodeStr("node_agent_reason", nsReason),
	nodeStr("update_path", nsUpdatePath),
	nodeStr("expected_agent_version", nsExpectedAgentVersion),
	nodeStr("observed_agent_version", nsObservedAgentVersion),
	nodeStr("cert_issuer_fingerprint", nsCertIssuerFingerprint),
	nodeStr("ingress_trust_fingerprint", nsIngressTrustFingerprint),
	nodeStr("host_fingerprint", nsHostFingerprint),
	nodeStr("terminal_stream_probe", nsTerminalStreamProbe),
	nodeStr("workload_impact", nsWorkloadImpact),
	nodeStr("health", nsHealth),
	nodeStr("gate", nsGate),
	nodeStr("connectivity_mode", nsConnectivityMode),
	readmodel.Float64("rtt_ms", func(v *nodeView) float64 { return v.row.rtt }),
	readmodel.Float64("loss_pct", func(v *nodeView) float64 { return v.row.loss }),
	readmodel.Float64("bandwidth_kbps", func(v *nodeView) float64 { return v.row.bandwidth }),
	readmodel.Int64("backlog_messages", func(v *nodeView) int64 { return v.row.backlog }),
	readmodel.Int64("seconds_behind", func(v *nodeView) int64 { return v.row.behind }),
	readmodel.Bool("replay_required", func(v *nodeView) bool { return v.row.replay }),
	readmodel.DateTime("last_seen_at", func(v *nodeView) time.Time { return readmodel.Epoch(unpackTime(v.row.lastSeen)) }),
	readmodel.Float64("attention_score", func(v *nodeView) float64 { return v.row.score }),
	readmodel.UInt64("version", func(v *nodeView) uint64 { return v.row.version }),
	readmodel.Now[nodeView]("updated_at"),
	readmodel.Strings("tags", func(v *nodeView) []string { return v.rows.list(v.row.tags) }),
	nodeStr("node_kind", nsNodeKind),
	nodeStr("lifecycle_intent", nsLifecycleIntent),
	nodeStr("phase", nsPhase),
	nodeStr("state", nsLifecycleState),
	readmodel.DateTime("phase_since", func(v *nodeView) time.Time { return readmodel.Epoch(unpackTime(v.row.phaseSince)) }),
	readmodel.UInt64("transitions", func(v *nodeView) uint64 { return v.row.transitions }),
	nodeStr("master_of_record", nsMasterOfRecord),
	readmodel.Strings("controller_ids", func(v *nodeView) []string { return v.rows.list(v.row.controllers) }),
	nodeStr("controller_id", nsControllerID),
	nodeStr("authority", nsAuthority),
	nodeStr("relay_id", nsRelayID),
	nodeStr("policy_bundle_id", nsPolicyBundleID),
	nodeStr("target_version", nsTargetVersion),
	nodeStr("reported_version", nsReportedVersion),
	nodeStr("rollout", nsRollout),
	nodeStr("artifact_id", nsArtifactID),
	nodeStr("artifact_digest", nsArtifactDigest),
	nodeStr("supply_chain", nsSupplyChain),
	readmodel.Int64("uptime_s", func(v *nodeView) int64 { return v.row.uptime }),
	readmodel.Strings("recent_events", func(v *nodeView) []string {
		c := v.rows.coords[v.row.coords]
		r := nodeagent.RecentOf(v.row.recent, c.topics, c.partition)
		return r.Strings()
	}),
)
