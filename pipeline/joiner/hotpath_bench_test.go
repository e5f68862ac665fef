package joiner

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/cputime"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream"
)

// sealRows empties the partition's output and held rows, as a seal that
// writes them leaves them.
func (p *partition) sealRows() {
	p.live.batch.Reset()
	p.held.current.Reset()
	p.held.nodes.Reset()
	p.held.seal++ // the rows the slots point at are gone
}

// benchJoiner is a joiner without a broker: the hot path of apply only.
func benchJoiner(b testing.TB) (*Joiner, *partition) {
	j := &Joiner{opts: Options{StageOptions: stream.StageOptions{Brokers: []string{"unused"}}}, m: newMetrics(nil), parts: map[int32]*partition{}}
	if err := j.opts.defaults(); err != nil {
		b.Fatal(err)
	}
	j.validator = contract.Validator{Environment: j.opts.Environment, ZeroCopy: true}
	j.partitions = 1
	j.initCounters()
	part := j.newPartition(0, nil)
	part.out = &part.live
	return j, part
}

// benchEvents returns n Kafka records of topic: platform records (one per
// identity) or observations cycling over the identities, in event time
// order (1 ms apart), with a per-producer seq.
func benchEvents(n, identities int, topic string, start time.Time) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		node := "gpu-eu-west-" + strconv.Itoa(100000+i%identities)
		at := start.Add(time.Duration(i) * time.Millisecond).Format("2006-01-02T15:04:05.000Z")
		var v string
		if topic == contract.DefaultTopics().PlatformRecords {
			v = fmt.Sprintf(`{"event_id":"rec-%d","event_type":"platform.record","schema_version":1,"producer":"gpuaas-registry","seq":%d,"occurred_at":%q,"correlation_id":"sync-1","environment":"local_parity","payload":{"record_type":"gpu_allocation","record_id":"alloc-%s","record_version":1,"resource_family":"gpuaas_allocation","product_id":"gpu-h100","owning_domain":"gpuaas","owning_package":"gpu-scheduler","domain_id":"eu-west","tags":[],"provider":"maas","provider_id":%q,"expected_state":"allocated","expected_version":"img-2026.11","deleted":false}}`,
				i, i+1, at, node, node)
		} else {
			v = fmt.Sprintf(`{"event_id":"obs-%d","event_type":"provider.observation","schema_version":1,"producer":"maas-scanner-eu1","seq":%d,"occurred_at":%q,"correlation_id":"scan-%d","environment":"local_parity","payload":{"provider":"maas","provider_id":%q,"resource_family":"gpuaas_allocation","observed_state":"allocated","observed_version":"img-2026.11","owner_ref":"alloc-%s"}}`,
				i, i+1, at, i/identities, node, node)
		}
		// Appended a second after it occurred, as a live producer writes.
		recs[i] = &kgo.Record{Topic: topic, Key: []byte("maas/" + node), Value: []byte(v), Timestamp: start.Add(time.Duration(i)*time.Millisecond + time.Second)}
	}
	return recs
}

// BenchmarkHotPath measures the joiner's per-event work for provider
// observations in the steady state (identities known, state agreeing):
// decode and validate, partition check, dedupe, join and classify, with
// no I/O. bench/joiner/README.md records the figures.
func BenchmarkHotPath(b *testing.B) {
	const identities = 100000
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	j, part := benchJoiner(b)
	for _, r := range benchEvents(identities, identities, contract.DefaultTopics().PlatformRecords, start) {
		j.apply(part, r)
	}
	obs := benchEvents(b.N, identities, contract.DefaultTopics().Observations, start.Add(time.Second))
	var bytes int64
	for _, r := range obs {
		bytes += int64(len(r.Value))
	}
	part.sealRows()
	b.SetBytes(bytes / int64(len(obs)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Now()
	for i := range b.N {
		j.apply(part, obs[i])
		if i%50000 == 0 {
			part.sealRows() // a flush
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cputime.Now()-cpu)/float64(b.N), "cpu-ns/op")
	if part.events != uint64(identities+b.N) {
		b.Fatalf("applied %d events, want %d", part.events, identities+b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// naiveState is the baseline the hot path is compared with: what a
// straightforward implementation does per event (encoding/json into
// generic structs, a map of "producer/seq" strings for dedupe, a map of
// records keyed by identity, a comparison of states).
type naiveState struct {
	seen    map[string]struct{}
	records map[string]naiveRecord
	obs     map[string]naiveObs
	drift   int
}

type naiveEnvelope struct {
	EventID       string          `json:"event_id"`
	EventType     string          `json:"event_type"`
	SchemaVersion int             `json:"schema_version"`
	Producer      string          `json:"producer"`
	Seq           *uint64         `json:"seq"`
	OccurredAt    time.Time       `json:"occurred_at"`
	CorrelationID string          `json:"correlation_id"`
	Environment   string          `json:"environment"`
	Payload       json.RawMessage `json:"payload"`
}

type naiveRecord struct {
	RecordID        string `json:"record_id"`
	Provider        string `json:"provider"`
	ProviderID      string `json:"provider_id"`
	ExpectedState   string `json:"expected_state"`
	ExpectedVersion string `json:"expected_version"`
}

type naiveObs struct {
	Provider        string `json:"provider"`
	ProviderID      string `json:"provider_id"`
	ObservedState   string `json:"observed_state"`
	ObservedVersion string `json:"observed_version"`
	OwnerRef        string `json:"owner_ref"`
	at              time.Time
}

func (n *naiveState) apply(b *testing.B, value []byte) {
	var env naiveEnvelope
	if err := json.Unmarshal(value, &env); err != nil {
		b.Fatal(err)
	}
	key := env.EventID
	if env.Seq != nil {
		key = fmt.Sprintf("%s/%d", env.Producer, *env.Seq)
	}
	if _, dup := n.seen[key]; dup {
		return
	}
	n.seen[key] = struct{}{}
	switch env.EventType {
	case contract.TypePlatformRecord:
		var r naiveRecord
		if err := json.Unmarshal(env.Payload, &r); err != nil {
			b.Fatal(err)
		}
		n.records[r.Provider+"/"+r.ProviderID] = r
	case contract.TypeProviderObservation:
		var o naiveObs
		if err := json.Unmarshal(env.Payload, &o); err != nil {
			b.Fatal(err)
		}
		o.at = env.OccurredAt
		id := o.Provider + "/" + o.ProviderID
		n.obs[id] = o
		if r, ok := n.records[id]; !ok || r.ExpectedState != o.ObservedState || r.ExpectedVersion != o.ObservedVersion || r.RecordID != o.OwnerRef {
			n.drift++
		}
	}
}

// BenchmarkHotPathNaive runs the naive baseline over the same events as
// BenchmarkHotPath, for the ratio in bench/joiner/README.md.
func BenchmarkHotPathNaive(b *testing.B) {
	const identities = 100000
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	n := &naiveState{seen: map[string]struct{}{}, records: map[string]naiveRecord{}, obs: map[string]naiveObs{}}
	for _, r := range benchEvents(identities, identities, contract.DefaultTopics().PlatformRecords, start) {
		n.apply(b, r.Value)
	}
	obs := benchEvents(b.N, identities, contract.DefaultTopics().Observations, start.Add(time.Second))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Now()
	for i := range b.N {
		n.apply(b, obs[i].Value)
	}
	b.StopTimer()
	b.ReportMetric(float64(cputime.Now()-cpu)/float64(b.N), "cpu-ns/op")
	if n.drift != 0 {
		b.Fatalf("%d disagreements in agreeing events", n.drift)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
