package rater_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	json "github.com/segmentio/encoding/json"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
)

// usage describes one usage event the tests send.
type usage struct {
	eventID, usageID, source, meteringID, unit, quantity, tenant, env string
}

func (u usage) key() string { return contract.UsageKey(u.source, u.meteringID) }

func (u usage) encode() []byte {
	env := u.env
	if env == "" {
		env = contract.EnvLocalParity
	}
	return fmt.Appendf(nil, `{"event_id":%q,"event_type":"usage.recorded","schema_version":1,"producer":"gw-test",`+
		`"occurred_at":"2026-11-21T10:15:30.123Z","correlation_id":"c-%s","environment":%q,"payload":{`+
		`"usage_id":%q,"metering_source":%q,"metering_id":%q,"unit_id":%q,"quantity":%q,`+
		`"product_id":"gpuaas","tenant_id":%q,"project_id":"p-1","window_start":"2026-11-21T10:00:00Z","window_end":"2026-11-21T10:15:00Z"}}`,
		u.eventID, u.usageID, env, u.usageID, u.source, u.meteringID, u.unit, u.quantity, u.tenant)
}

func produce(t testing.TB, brokers []string, topic string, us ...usage) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rs := make([]*kgo.Record, len(us))
	for i, u := range us {
		rs[i] = &kgo.Record{Topic: topic, Key: []byte(u.key()), Value: u.encode()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readAll returns every record of topic a read_committed consumer sees,
// polling until no new record arrives for idle.
func readAll(t testing.TB, brokers []string, topic string, idle time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for {
		ctx, cancel := context.WithTimeout(context.Background(), idle)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.Empty() {
			return out
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
}

type ratedLine struct {
	EventID  string         `json:"event_id"`
	Producer string         `json:"producer"`
	Payload  contract.Rated `json:"payload"`
}

func decodeRated(t testing.TB, r *kgo.Record) ratedLine {
	t.Helper()
	var l ratedLine
	if err := json.Unmarshal(r.Value, &l); err != nil {
		t.Fatalf("rated line %s: %v", r.Value, err)
	}
	if _, _, verr := (contract.Validator{Environment: contract.EnvLocalParity}).DecodeEvent(r.Value); verr != nil {
		t.Fatalf("rated line is not a valid contract event: %v\n%s", verr, r.Value)
	}
	return l
}

func decodeQuarantine(t testing.TB, r *kgo.Record) contract.Quarantined {
	t.Helper()
	var q contract.Quarantined
	if err := json.Unmarshal(r.Value, &q); err != nil {
		t.Fatalf("quarantine value %s: %v", r.Value, err)
	}
	return q
}

// buildRater builds cmd/rater into dir and returns its path and the
// absolute path of the shipped price book (deploy/pricebook.json).
func buildRater(t *testing.T, dir string) (bin, book string) {
	t.Helper()
	bin = filepath.Join(dir, "rater")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/driftline/driftline/cmd/rater").CombinedOutput(); err != nil {
		t.Fatalf("build rater: %v\n%s", err, out)
	}
	book, err := filepath.Abs(filepath.Join("..", "..", "..", "deploy", "pricebook.json"))
	if err != nil {
		t.Fatal(err)
	}
	return bin, book
}
