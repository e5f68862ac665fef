// Package streamtest holds the set-up the tests of the stream stages
// share: a broker with the pipeline's topics and a ClickHouse read model
// (internal/testenv), events as a producer sends them, and a stage run
// in the background until the test stops it.
package streamtest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/readmodel"
)

// Env is a broker with the pipeline's topics, a client of it, and a
// connection to a read model; all are closed when the test ends.
type Env struct {
	Brokers  []string
	Names    contract.Topics
	Client   *kgo.Client
	CH       driver.Conn
	Database string
}

// NewEnv starts a broker whose topics have partitions partitions and a
// read model.
func NewEnv(t testing.TB, partitions int32) *Env {
	t.Helper()
	brokers, names := testenv.Kafka(t, partitions)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cfg := testenv.ClickHouse(t)
	conn, err := readmodel.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &Env{Brokers: brokers, Names: names, Client: cl, CH: conn, Database: cfg.Database}
}

// Event returns the record of a valid event of type typ that producer
// sends as its seq-th, occurred at at, keyed and addressed to its topic
// in names as the gateway would; a fixture that is not valid fails t.
func Event(t testing.TB, names contract.Topics, typ, producer string, seq uint64, at time.Time, payload any) *kgo.Record {
	t.Helper()
	body, _ := json.Marshal(payload)
	line, _ := json.Marshal(map[string]any{
		"event_id": fmt.Sprintf("%s-%d", producer, seq), "event_type": typ, "schema_version": 1,
		"producer": producer, "seq": seq, "occurred_at": at.Format(time.RFC3339Nano),
		"correlation_id": "c-" + producer, "environment": "local_parity", "payload": json.RawMessage(body),
	})
	_, p, verr := contract.Validator{}.DecodeEvent(line)
	if verr != nil {
		t.Fatalf("fixture event invalid: %v", verr)
	}
	return &kgo.Record{Topic: names.ForType(typ), Key: []byte(contract.KeyOf(p)), Value: line}
}

// Start builds a stage with newStage and runs it in the background until
// the returned stop is called, which cancels the context of both and
// reports an error Run returned.
func Start[S interface{ Run(context.Context) error }](t testing.TB, name string, newStage func(context.Context) (S, error)) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := newStage(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s run: %v", name, err)
		}
	}
}
