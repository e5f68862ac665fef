package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	json "github.com/segmentio/encoding/json"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
)

// A producer that bypasses the gateway writes bad records straight to a
// data topic; a consumer validates them with the shared validator and
// quarantines the failures through a Quarantiner, in the gateway's shape.
func TestQuarantinerFromConsumer(t *testing.T) {
	e := newTestEnv(t, nil)
	good := enc(t, observation("ok-1", "node-1"))
	bad := [][]byte{
		[]byte(`{"event_id":"x","event_id":"y"}`),
		enc(t, with(observation("wrong-env", "node-2"), "environment", contract.EnvProd)),
		[]byte("not json \xff"),
	}
	native, err := kgo.NewClient(kgo.SeedBrokers(e.cluster.ListenAddrs()...), kgo.DefaultProduceTopic(e.names.Observations))
	if err != nil {
		t.Fatal(err)
	}
	defer native.Close()
	for _, v := range append([][]byte{good}, bad...) {
		r := &kgo.Record{Key: []byte("maas/node-1"), Value: v, Headers: []kgo.RecordHeader{{Key: contract.HeaderActorID, Value: []byte("SYSTEM::rogue")}}}
		if err := native.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	reg := prometheus.NewRegistry()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	q, err := NewQuarantiner(native, QuarantinerOptions{ActorID: "SYSTEM::joiner", Topic: e.names.Quarantine, Registerer: reg, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	v := contract.Validator{Environment: contract.EnvLocalParity}
	var wantReasons []contract.Reason
	for _, r := range e.read(e.names.Observations, 1+len(bad)) {
		if _, _, verr := v.DecodeEvent(r.Value); verr != nil {
			q.Produce(context.Background(), r, verr)
			wantReasons = append(wantReasons, verr.Reason)
		}
	}
	if err := q.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []contract.Reason{contract.ReasonDuplicateKey, contract.ReasonWrongEnvironment, contract.ReasonBadJSON}
	if len(wantReasons) != len(want) {
		t.Fatalf("validator reasons %v", wantReasons)
	}
	for i, qr := range e.read(e.names.Quarantine, len(bad)) {
		var doc contract.Quarantined
		if err := json.Unmarshal(qr.Value, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Reason != want[i] || header(qr, contract.HeaderReason) != string(want[i]) || header(qr, contract.HeaderActorID) != "SYSTEM::joiner" ||
			string(qr.Key) != "maas/node-1" || doc.SourceTopic != e.names.Observations || doc.SourceOffset == nil || *doc.SourceOffset != int64(i+1) ||
			doc.OriginActorID != "SYSTEM::rogue" || doc.ActorID != "SYSTEM::joiner" || doc.ReceivedAt != "2026-11-21T10:00:00Z" || doc.LineBytes != len(bad[i]) {
			t.Fatalf("quarantine record %d: key %q headers %v value %s", i, qr.Key, qr.Headers, qr.Value)
		}
		if want[i] == contract.ReasonWrongEnvironment && doc.EventID != "wrong-env" {
			t.Fatalf("event id %q", doc.EventID)
		}
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || len(mfs[0].Metric) != 3 {
		t.Fatalf("metrics %v %v", mfs, err)
	}
	if _, err := NewQuarantiner(nil, QuarantinerOptions{ActorID: "HUMAN::x"}); err == nil {
		t.Fatal("a non-SYSTEM actor was accepted")
	}
}
