package joiner

import (
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/joiner/nodeagent"
	"github.com/driftline/driftline/pipeline/readmodel/sink"
)

// nodeRanking is a partition's attention top of nodes
// (attention_top_nodes): the nodes whose current row's gate is not pass,
// by attention_score and then node_id, over all domains and per owning
// domain. The attention queue takes its nodes from these slots, as it
// takes its findings from attention_top, instead of ranking
// node_agent_status, which grows with the fleet.
//
// It is kept from the rows the partition's tracker emits, while restoring
// too, and rebuilt from the tracker after a checkpoint is loaded: a node's
// place depends only on its last row, which the tracker holds. Every row
// it writes is stamped with ver, which grows with every row applied (and
// never falls below a row's own version) and is part of the checkpoint,
// so a replayed position writes the same rows and a later one a higher
// version, as the finding summary does.
type nodeRanking struct {
	ranking
	ver uint64
	// nodes holds each node's place, by the node's aux word in the
	// tracker (minus one).
	nodes []nodeSlot
	// all makes the next flush write every top (a fresh or restored
	// partition).
	all bool
}

// nodeSlot is what the partition keeps per node: its row of the round and
// its place in the tops.
type nodeSlot struct {
	id     string
	domain string
	dtop   *top // the top of domain, once looked up
	score  float64
	ranked bool    // the gate of the node's last row is not pass
	at     rowSlot // the node's row of the round (output.addNode)
}

func newNodeRanking() *nodeRanking { return &nodeRanking{ranking: newRanking(), all: true} }

// apply moves the node of row s to its place and returns its slot. aux is
// the node's word in the tracker: 0 for a node the ranking has not seen
// (since a restore), the slot's number after.
func (r *nodeRanking) apply(s *nodeagent.Status, aux *uint32) *nodeSlot {
	r.ver = max(r.ver+1, s.Version)
	return r.place(s, aux)
}

// place is apply without the version.
func (r *nodeRanking) place(s *nodeagent.Status, aux *uint32) *nodeSlot {
	if *aux == 0 {
		r.nodes = append(r.nodes, nodeSlot{id: s.NodeID})
		*aux = uint32(len(r.nodes))
	}
	sl := &r.nodes[*aux-1]
	ranked := s.Gate != string(contract.GatePass)
	// Most rows refresh a node's figures and keep its place: the strings
	// are the tracker's interned ones, mostly compared by pointer.
	if ranked == sl.ranked && (!ranked || sl.score == s.AttentionScore && sl.domain == s.OwningDomain) {
		return sl
	}
	if sl.ranked {
		e := topEntry{sl.score, sl.id}
		r.global().remove(e)
		sl.dtop.remove(e)
	}
	sl.ranked, sl.score = ranked, s.AttentionScore
	if ranked {
		if sl.dtop == nil || sl.domain != s.OwningDomain {
			sl.domain, sl.dtop = s.OwningDomain, r.top(scope{true, s.OwningDomain})
		}
		e := topEntry{sl.score, sl.id}
		r.global().add(e)
		sl.dtop.add(e)
	}
	return sl
}

// rebuild places every node of a tracker just loaded from a checkpoint
// (rebind is its Rebind), binding their aux words to new slots, into an
// empty ranking. ver is the ranking's version saved with the checkpoint,
// 0 if it has none (a checkpoint of an older joiner): the highest version
// of a node's row is taken then, which no later row stays below.
func (r *nodeRanking) rebuild(rebind func(func(*nodeagent.Status, *uint32)), ver uint64) {
	rebind(func(s *nodeagent.Status, aux *uint32) {
		ver = max(ver, s.Version)
		r.place(s, aux)
	})
	// How many slots the previous owner wrote is not in the checkpoint:
	// the first flush clears every slot past the end of each top.
	for _, t := range r.tops {
		t.written = sink.AttentionSlots
	}
	r.ver, r.all = ver, true
}

// flush appends the slots changed since the last flush to b.
func (r *nodeRanking) flush(p int32, b *sink.Batch) {
	r.refill()
	b.NodeTop = r.ranking.flush(p, r.ver, r.all, b.NodeTop)
	r.all = false
}

// refill rebuilds, in one pass over the partition's nodes, every top that
// lost entries below AttentionSlots while its scope holds more.
func (r *nodeRanking) refill() {
	r.ranking.refill(func(offer func(string, topEntry)) {
		for i := range r.nodes {
			if sl := &r.nodes[i]; sl.ranked {
				offer(sl.domain, topEntry{sl.score, sl.id})
			}
		}
	})
}
