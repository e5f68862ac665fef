package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/stack"
	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/ingest"
	"github.com/driftline/driftline/pipeline/service"
)

// conflictProducer is the fault test's producer that gets identity
// wrong: besides its own events it redelivers some and sends others again
// under the same seq with other content, over HTTP and straight to Kafka,
// while the schedule kills components. Its events are platform records of
// its own identities in an absent-expecting state that nothing observes,
// so whatever the joiners apply of them raises no finding and the truth
// stays the generator's. A repeat is sent only after its first copy was
// acknowledged, so the first copy is the one applied.
type conflictProducer struct {
	t      *testing.T
	url    string
	broker string
	rng    *rand.Rand
	cl     *kgo.Client

	mu sync.Mutex // mu protects the counts below
	// sure holds the event ids that must be in platform.records, maybe
	// those that may be (a repeat over HTTP the gateway answered
	// duplicate or rejected, or accepted after a restart emptied its
	// memory).
	sure, maybe map[string]bool
	// kafkaConflicts are the conflicts written straight to Kafka and
	// acknowledged; httpConflictsRejected and httpConflictsWritten those
	// the gateway rejected as conflicting_duplicate or wrote (it forgot
	// the first copy).
	kafkaConflicts, httpConflictsRejected, httpConflictsWritten int
	redeliveries                                                int
}

// conflictProducerName is the producer its events name.
const conflictProducerName = "fault-conflicts"

func newConflictProducer(t *testing.T, seed int64, url, broker string) *conflictProducer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.RecordRetries(1000))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &conflictProducer{t: t, url: url, broker: broker, rng: rand.New(rand.NewPCG(uint64(seed), 77)), cl: cl,
		sure: map[string]bool{}, maybe: map[string]bool{}}
}

// line returns the envelope of the producer's seq-th event with eventID,
// about identity n in state, record version v.
func (p *conflictProducer) line(eventID string, seq uint64, n int, state string, v int64) []byte {
	id := fmt.Sprintf("fault-conflict-%d", n)
	payload, _ := json.Marshal(contract.PlatformRecord{RecordType: "app_instance", RecordID: "rec-" + id, RecordVersion: v,
		ResourceFamily: contract.FamilyAppRuntime, ProductID: "apps", OwningDomain: "conflicts", DomainID: "d-conflicts",
		Provider: contract.ProviderAppRuntime, ProviderID: id, ExpectedState: state, ExpectedVersion: "sha256:aa"})
	line, _ := json.Marshal(map[string]any{
		"event_id": eventID, "event_type": contract.TypePlatformRecord, "schema_version": 1, "producer": conflictProducerName,
		"seq": seq, "occurred_at": "2026-11-21T10:00:00Z", "environment": contract.EnvLocalParity, "payload": json.RawMessage(payload),
	})
	return line
}

// post sends one line over HTTP until a gateway answers it, and returns
// its receipt.
func (p *conflictProducer) post(ctx context.Context, line []byte) (ingest.Receipt, error) {
	c := &ingest.Client{URL: p.url, APIKey: service.DefaultLocalAPIKey, HTTP: &http.Client{Timeout: 20 * time.Second}}
	for {
		resp, err := c.Post(ctx, [][]byte{line})
		if err == nil && len(resp.Receipts) == 1 {
			return resp.Receipts[0], nil
		}
		if ctx.Err() != nil {
			return ingest.Receipt{}, ctx.Err()
		}
		time.Sleep(200 * time.Millisecond) // the gateway is down or busy: retry, as a producer does
	}
}

// produce writes one record straight to Kafka (the standard partitioner,
// as a Kafka-native producer uses) until acknowledged.
func (p *conflictProducer) produce(ctx context.Context, line []byte, n int) error {
	key := []byte(contract.IdentityKey(contract.ProviderAppRuntime, fmt.Sprintf("fault-conflict-%d", n)))
	for {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := p.cl.ProduceSync(pctx, &kgo.Record{Topic: contract.DefaultTopics().PlatformRecords, Key: key, Value: line}).FirstErr()
		cancel()
		if err == nil || ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// run sends rounds events, one round every pace: a new event over HTTP,
// then at random a redelivery and a conflict, each over HTTP or Kafka.
func (p *conflictProducer) run(ctx context.Context, rounds int, pace time.Duration) error {
	states := []string{"released", "deleted", "decommissioned", "retired"}
	for n := range rounds {
		seq := uint64(n + 1)
		first := p.line(fmt.Sprintf("fc-%d", n), seq, n, states[n%len(states)], 1)
		rc, err := p.post(ctx, first)
		if err != nil {
			return err
		}
		if rc.Status == ingest.StatusRejected {
			return fmt.Errorf("first event %d rejected: %+v", n, rc)
		}
		p.mu.Lock()
		p.sure[fmt.Sprintf("fc-%d", n)] = true
		p.mu.Unlock()
		if p.rng.IntN(2) == 0 { // a redelivery
			p.mu.Lock()
			p.redeliveries++
			p.mu.Unlock()
			if p.rng.IntN(2) == 0 {
				if err := p.produce(ctx, first, n); err != nil {
					return err
				}
			} else if _, err := p.post(ctx, first); err != nil {
				return err
			}
		}
		for k := range p.rng.IntN(3) { // conflicts: the seq again, another version
			id := fmt.Sprintf("fc-%d", n)
			if p.rng.IntN(2) == 0 {
				id = fmt.Sprintf("fc-%d-reused-%d", n, k)
			}
			line := p.line(id, seq, n, states[p.rng.IntN(len(states))], int64(k+2))
			if p.rng.IntN(2) == 0 {
				if err := p.produce(ctx, line, n); err != nil {
					return err
				}
				p.mu.Lock()
				p.kafkaConflicts++
				p.sure[id] = true
				p.mu.Unlock()
				continue
			}
			rc, err := p.post(ctx, line)
			if err != nil {
				return err
			}
			p.mu.Lock()
			switch {
			case rc.Status == ingest.StatusRejected && rc.Reason == contract.ReasonConflictingDuplicate:
				p.httpConflictsRejected++
			case rc.Status == ingest.StatusAccepted, rc.Status == ingest.StatusDuplicate:
				// Written (duplicate: by an earlier attempt of this post
				// whose answer was lost, after a restart emptied the
				// gateway's memory of the first copy).
				p.httpConflictsWritten++
			default:
				p.mu.Unlock()
				return fmt.Errorf("conflict over HTTP answered %+v", rc)
			}
			p.maybe[id] = true
			p.mu.Unlock()
		}
		select {
		case <-time.After(pace):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// addTo adds the producer's events to the topics' truth.
func (p *conflictProducer) addTo(want *topicTruth) {
	p.mu.Lock()
	defer p.mu.Unlock()
	topic := contract.DefaultTopics().PlatformRecords
	if want.allowed == nil {
		want.allowed = map[string]map[string]bool{}
	}
	if want.allowed[topic] == nil {
		want.allowed[topic] = map[string]bool{}
	}
	for id := range p.sure {
		want.ids[topic][id] = true
	}
	for id := range p.maybe {
		if !p.sure[id] {
			want.allowed[topic][id] = true
		}
	}
}

// check compares the conflicts the joiners counted for the producer with
// what it sent: every conflict that reached Kafka is counted (a copy
// written twice by a retried write counts twice, so at least as many),
// and the faulted group counted exactly what the uninterrupted reference
// group counted over the same topics.
func (p *conflictProducer) check(t *testing.T, ctx context.Context, s *stack.Stack, group, refGroup string) {
	t.Helper()
	conn := testenv.Open(t, s.ClickHouse())
	count := func(db, consumer string) int {
		var n uint64
		q := fmt.Sprintf(`SELECT sum(events) FROM %s.producer_rejections FINAL WHERE consumer = ? AND producer = ? AND reason = ?`, db)
		if err := conn.QueryRow(ctx, q, consumer, conflictProducerName, string(contract.ReasonConflictingDuplicate)).Scan(&n); err != nil {
			t.Fatalf("read producer_rejections of %s: %v", consumer, err)
		}
		return int(n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	atLeast := p.kafkaConflicts + p.httpConflictsWritten
	got, ref := count(s.ClickHouse().Database, group), count("reference", refGroup)
	t.Logf("conflicting producer: %d redeliveries; conflicts: %d straight to Kafka, %d rejected by the gateway, %d written by it; the joiners counted %d (reference %d)",
		p.redeliveries, p.kafkaConflicts, p.httpConflictsRejected, p.httpConflictsWritten, got, ref)
	if got < atLeast || got != ref {
		t.Errorf("the joiners counted %d conflicts of %s (the uninterrupted run %d), want %d or more (every one that reached Kafka) and the same as the uninterrupted run",
			got, conflictProducerName, ref, atLeast)
	}
}
