package sink

import "github.com/driftline/driftline/pipeline/readmodel"

// AttentionSlots is how many of its open findings of highest attention a
// joiner partition keeps in attention_top, and of its nodes in
// attention_top_nodes, over all domains and per owning domain: the
// attention queue is served from there for n up to AttentionSlots.
const AttentionSlots = 100

// CountKey is the group a finding is counted in (finding_counts).
type CountKey struct {
	OwningDomain   string
	Classification string
	Severity       string
	Status         string
	Posture        string
	ProductID      string
	ResourceFamily string
	Provider       string
	DomainID       string
}

// Count is the absolute number of findings of one group on one joiner
// partition, as of Version.
type Count struct {
	Partition int32
	Key       CountKey
	Findings  uint64
	Version   uint64
}

// TopSlot is one slot of a partition's attention top, of findings
// (attention_top) or of nodes (attention_top_nodes): over all domains or,
// with PerDomain, of OwningDomain. ID is the finding's evidence_id or the
// node's node_id; an empty ID clears a slot past the end of a shrunken
// top.
type TopSlot struct {
	PerDomain    bool
	OwningDomain string
	Partition    int32
	Rank         uint16
	ID           string
	Score        float64
	Version      uint64
}

var countsTable = readmodel.NewTable("finding_counts",
	readmodel.UInt32("partition", func(n *Count) uint32 { return uint32(n.Partition) }),
	readmodel.String("owning_domain", func(n *Count) string { return n.Key.OwningDomain }),
	readmodel.String("classification", func(n *Count) string { return n.Key.Classification }),
	readmodel.String("severity", func(n *Count) string { return n.Key.Severity }),
	readmodel.String("status", func(n *Count) string { return n.Key.Status }),
	readmodel.String("posture", func(n *Count) string { return n.Key.Posture }),
	readmodel.String("product_id", func(n *Count) string { return n.Key.ProductID }),
	readmodel.String("resource_family", func(n *Count) string { return n.Key.ResourceFamily }),
	readmodel.String("provider", func(n *Count) string { return n.Key.Provider }),
	readmodel.String("domain_id", func(n *Count) string { return n.Key.DomainID }),
	readmodel.UInt64("findings", func(n *Count) uint64 { return n.Findings }),
	readmodel.UInt64("version", func(n *Count) uint64 { return n.Version }),
)

var (
	topTable     = newTopTable("attention_top", "evidence_id")
	nodeTopTable = newTopTable("attention_top_nodes", "node_id")
)

// newTopTable is the insert of TopSlot rows into name, whose id column is
// idCol.
func newTopTable(name, idCol string) *readmodel.Table[TopSlot] {
	return readmodel.NewTable(name,
		readmodel.Bool("per_domain", func(t *TopSlot) bool { return t.PerDomain }),
		readmodel.String("owning_domain", func(t *TopSlot) string { return t.OwningDomain }),
		readmodel.UInt32("partition", func(t *TopSlot) uint32 { return uint32(t.Partition) }),
		readmodel.UInt16("rank", func(t *TopSlot) uint16 { return t.Rank }),
		readmodel.String(idCol, func(t *TopSlot) string { return t.ID }),
		readmodel.Float64("attention_score", func(t *TopSlot) float64 { return t.Score }),
		readmodel.UInt64("version", func(t *TopSlot) uint64 { return t.Version }),
	)
}
