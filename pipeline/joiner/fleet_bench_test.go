package joiner

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/cputime"
	"github.com/driftline/driftline/pipeline/fleet"
	"github.com/driftline/driftline/pipeline/logmerge"
	"github.com/driftline/driftline/pipeline/topics"
)

// fleetRecords returns the joiner's records of a generated fleet of about
// events events (fleet.SizedConfig), as one partition holds them: the
// platform records, observations and scan markers, and heartbeats, merged
// by timestamp as logmerge.Merge applies them.
func fleetRecords(b *testing.B, events int) []*kgo.Record {
	g, err := fleet.New(fleet.SizedConfig(events))
	if err != nil {
		b.Fatal(err)
	}
	names := topics.Defaults()
	joined := names.Joined()
	streams := make([][]*kgo.Record, len(joined))
	err = g.Emit(func(e *fleet.Event) error {
		topic := names.ForType(e.Type)
		for s, t := range joined {
			if t == topic {
				streams[s] = append(streams[s], &kgo.Record{Topic: topic, Key: bytes.Clone(e.Key),
					Value: bytes.Clone(e.Line), Timestamp: e.OccurredAt})
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

// BenchmarkApplyFleet applies the joiner's records of a generated fleet
// of 1M events (613,641 records) to one new partition, sealing its output
// every 200,000 records as a flush would: decoding, dedupe, the join,
// classification, node-agent state, finding rows and summaries, without
// the fetch or the ClickHouse write. cpu-ns/record is the process's CPU
// time per record, the garbage collector's included. bench/joiner/README.md
// records the figures.
//
//	go test -run '^$' -bench ApplyFleet -benchtime 3x -count 3 ./pipeline/joiner/
func BenchmarkApplyFleet(b *testing.B) {
	recs := fleetRecords(b, 1_000_000)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Now()
	for range b.N {
		j, part := benchJoiner(b)
		for i, r := range recs {
			j.apply(part, r)
			if i%200_000 == 199_999 {
				part.summary.flush(part.p, part.live.batch)
				part.live.reset()
			}
		}
	}
	b.StopTimer()
	n := float64(b.N) * float64(len(recs))
	b.ReportMetric(float64(cputime.Now()-cpu)/n, "cpu-ns/record")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/record")
}
