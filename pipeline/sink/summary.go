package sink

import (
	"context"
	"fmt"
)

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

const insertCounts = `INSERT INTO finding_counts (partition, owning_domain, classification, severity, status,
 posture, product_id, resource_family, provider, domain_id, findings, version)`

const insertTop = `INSERT INTO attention_top (per_domain, owning_domain, partition, rank, evidence_id, attention_score, version)`

// writeSummaries inserts the batches' finding counts and attention slots.
// The rows are absolute values with the partition's transition version,
// so a batch written twice reads the same.
func (c *ClickHouse) writeSummaries(ctx context.Context, bs []*Batch) error {
	if count(bs, func(b *Batch) int { return len(b.Counts) }) > 0 {
		batch, err := c.conn.PrepareBatch(ctx, insertCounts)
		if err != nil {
			return fmt.Errorf("prepare finding_counts insert: %w", err)
		}
		for _, b := range bs {
			for i := range b.Counts {
				n, k := &b.Counts[i], &b.Counts[i].Key
				if err := batch.Append(uint32(n.Partition), k.OwningDomain, k.Classification, k.Severity, k.Status,
					k.Posture, k.ProductID, k.ResourceFamily, k.Provider, k.DomainID, n.Findings, n.Version); err != nil {
					return fmt.Errorf("append finding_counts row: %w", err)
				}
			}
		}
		if err := batch.Send(); err != nil {
			return fmt.Errorf("insert finding_counts: %w", err)
		}
	}
	if count(bs, func(b *Batch) int { return len(b.Top) }) > 0 {
		batch, err := c.conn.PrepareBatch(ctx, insertTop)
		if err != nil {
			return fmt.Errorf("prepare attention_top insert: %w", err)
		}
		for _, b := range bs {
			for i := range b.Top {
				t := &b.Top[i]
				perDomain := uint8(0)
				if t.PerDomain {
					perDomain = 1
				}
				if err := batch.Append(perDomain, t.OwningDomain, uint32(t.Partition), t.Rank, t.EvidenceID, t.Score, t.Version); err != nil {
					return fmt.Errorf("append attention_top row: %w", err)
				}
			}
		}
		if err := batch.Send(); err != nil {
			return fmt.Errorf("insert attention_top: %w", err)
		}
	}
	return nil
}
