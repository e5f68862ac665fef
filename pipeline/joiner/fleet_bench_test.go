package joiner

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/cputime"
	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/logmerge"
)

// fleetRecords returns the joiner's records of a generated fleet of about
// events events (fleet.SizedConfig), as one partition holds them: the
// platform records, observations and scan markers, and heartbeats, merged
// by timestamp as logmerge.Merge applies them.
func fleetRecords(b testing.TB, events int) []*kgo.Record {
	g, err := fleet.New(fleet.SizedConfig(events))
	if err != nil {
		b.Fatal(err)
	}
	names := contract.DefaultTopics()
	joined := names.Joined()
	streams := make([][]*kgo.Record, len(joined))
	err = g.Emit(func(e *fleet.Event) error {
		topic := names.ForType(e.Type)
		for s, t := range joined {
			if t == topic {
				streams[s] = append(streams[s], &kgo.Record{Topic: topic, Key: bytes.Clone(e.Key),
					Value: bytes.Clone(e.Line), Headers: gatewayHeaders(), Timestamp: e.OccurredAt})
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	merge := logmerge.NewMerge(len(joined))
	for s, recs := range streams {
		merge.Push(s, recs, 0)
	}
	var out []*kgo.Record
	for r, _ := merge.Pop(); r != nil; r, _ = merge.Pop() {
		out = append(out, r)
	}
	return out
}

// gatewayHeaders returns the headers a gateway stamps on every record
// (CONTRACT section 2), each record with copies of its own as a fetch
// decodes them.
func gatewayHeaders() []kgo.RecordHeader {
	return []kgo.RecordHeader{
		{Key: strings.Clone(contract.HeaderActorID), Value: []byte("SYSTEM::fleet-gateway")},
		{Key: strings.Clone(contract.HeaderSourceType), Value: []byte("SYSTEM")},
		{Key: strings.Clone(contract.HeaderPolicyRev), Value: []byte("rev-1")},
	}
}

// BenchmarkApplyFleet applies the joiner's records of a generated fleet
// of 1M events (613,641 records) to new partitions, sealing each one's
// output every 200,000 of its records as a flush would: decoding, dedupe,
// the join, classification, node-agent state, finding rows and summaries,
// without the fetch or the ClickHouse write. cpu-ns/record is the
// process's CPU time per record, the garbage collector's included.
// bench/joiner/README.md records the figures.
//
// partitions=1 applies them to one partition (133,332 identities, about
// what a partition of the 10M-event fleet tracks). partitions=8 applies a
// copy of its own to each of eight partitions, in turns of 2,048 records
// as fetches bring them: the state is then eight times larger, as in a
// joiner owning eight partitions, and far less of it stays in the caches.
//
// The iterations alternate between the joiner's path (applyAhead, which
// prefetches a record's bytes and state a few records before applying
// it), reported as ahead-cpu-ns/record, and applying the records one after
// the other without it, direct-cpu-ns/record: on a shared machine a
// comparison is only fair within one run. An untimed pass first grows the
// heap to its size.
//
//	go test -run '^$' -bench ApplyFleet -benchtime 4x ./pipeline/joiner/
func BenchmarkApplyFleet(b *testing.B) {
	recs := fleetRecords(b, 1_000_000)
	for _, parts := range []int{1, 8} {
		copies := make([][]*kgo.Record, parts)
		copies[0] = recs
		for p := 1; p < parts; p++ {
			copies[p] = make([]*kgo.Record, len(recs))
			for i, r := range recs {
				c := *r
				c.Key, c.Value, c.Headers = bytes.Clone(r.Key), bytes.Clone(r.Value), gatewayHeaders()
				copies[p][i] = &c
			}
		}
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			applyFleet(b, copies, false)
			b.ReportAllocs()
			b.ResetTimer()
			var cpu, runs [2]int64
			for i := range b.N {
				ahead := i%2 == 0
				start := cputime.Now()
				applyFleet(b, copies, ahead)
				k := 0
				if ahead {
					k = 1
				}
				cpu[k] += int64(cputime.Now() - start)
				runs[k]++
			}
			b.StopTimer()
			n := float64(len(copies) * len(copies[0]))
			for k, unit := range []string{"direct-cpu-ns/record", "ahead-cpu-ns/record"} {
				if runs[k] > 0 {
					b.ReportMetric(float64(cpu[k])/float64(runs[k])/n, unit)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/record")
		})
	}
}

// applyFleet applies each of copies to a new partition of its own, in
// turns, with or without the read-ahead.
func applyFleet(b *testing.B, copies [][]*kgo.Record, ahead bool) {
	const turn, seal = 2048, 200_000
	j, first := benchJoiner(b)
	parts := []*partition{first}
	for p := 1; p < len(copies); p++ {
		part := j.newPartition(int32(p), nil)
		part.out = &part.live
		parts = append(parts, part)
	}
	for off := 0; off < len(copies[0]); off += turn {
		for p, part := range parts {
			chunk := copies[p][off:min(off+turn, len(copies[p]))]
			if ahead {
				j.applyAhead(part, func() *kgo.Record {
					if len(chunk) == 0 {
						return nil
					}
					r := chunk[0]
					chunk = chunk[1:]
					return r
				}, func(*kgo.Record) {})
			} else {
				for _, r := range chunk {
					j.apply(part, r)
				}
			}
			if (off+turn)%seal < turn || off+turn >= len(copies[p]) {
				part.summary.flush(part.p, part.live.batch)
				part.sealRows()
			}
		}
	}
}
