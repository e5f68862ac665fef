package sink

import "github.com/driftline/driftline/pipeline/chdb"

// AttentionSlots is how many of its open findings of highest attention a
// joiner partition keeps in attention_top, over all domains and per
// owning domain: the attention queue is served from there for n up to
// AttentionSlots.
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

// TopSlot is one slot of a partition's attention top: over all domains
// or, with PerDomain, of OwningDomain. An empty EvidenceID clears a slot
// past the end of a shrunken top.
type TopSlot struct {
	PerDomain    bool
	OwningDomain string
	Partition    int32
	Rank         uint16
	EvidenceID   string
	Score        float64
	Version      uint64
}

var countsTable = chdb.NewTable("finding_counts",
	chdb.UInt32("partition", func(n *Count) uint32 { return uint32(n.Partition) }),
	chdb.String("owning_domain", func(n *Count) string { return n.Key.OwningDomain }),
	chdb.String("classification", func(n *Count) string { return n.Key.Classification }),
	chdb.String("severity", func(n *Count) string { return n.Key.Severity }),
	chdb.String("status", func(n *Count) string { return n.Key.Status }),
	chdb.String("posture", func(n *Count) string { return n.Key.Posture }),
	chdb.String("product_id", func(n *Count) string { return n.Key.ProductID }),
	chdb.String("resource_family", func(n *Count) string { return n.Key.ResourceFamily }),
	chdb.String("provider", func(n *Count) string { return n.Key.Provider }),
	chdb.String("domain_id", func(n *Count) string { return n.Key.DomainID }),
	chdb.UInt64("findings", func(n *Count) uint64 { return n.Findings }),
	chdb.UInt64("version", func(n *Count) uint64 { return n.Version }),
)

var topTable = chdb.NewTable("attention_top",
	chdb.Bool("per_domain", func(t *TopSlot) bool { return t.PerDomain }),
	chdb.String("owning_domain", func(t *TopSlot) string { return t.OwningDomain }),
	chdb.UInt32("partition", func(t *TopSlot) uint32 { return uint32(t.Partition) }),
	chdb.UInt16("rank", func(t *TopSlot) uint16 { return t.Rank }),
	chdb.String("evidence_id", func(t *TopSlot) string { return t.EvidenceID }),
	chdb.Float64("attention_score", func(t *TopSlot) float64 { return t.Score }),
	chdb.UInt64("version", func(t *TopSlot) uint64 { return t.Version }),
)
