package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/internal/fleet"
	"github.com/driftline/driftline/internal/stack"
	"github.com/driftline/driftline/internal/testenv"
	"github.com/driftline/driftline/pipeline/api/client"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/ingest"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
	"github.com/driftline/driftline/pipeline/service"
)

// skewProducer is the producer whose clock is wrong in the skew tests. Its
// events observe identities of their own (app_runtime/skew-...), so that
// the other producers' findings must be exactly the generator's truth.
const skewProducer = "skewed-clock"

// skewEvent is one event of the skewed producer.
type skewEvent struct {
	id     string
	kafka  bool            // written by a Kafka client, else posted to the gateway
	future bool            // occurred_at ahead of every clock, else far behind
	reason contract.Reason // why it is never applied
	line   []byte
}

// skewPlan is a seeded set of skewed events: the future ones are sent
// while the fleet is fed (the worst case: a jump before the fleet's
// events), the past ones after it, when every partition's event time has
// moved past them by more than the dedupe horizon.
type skewPlan struct {
	future, past []skewEvent
	gaps         []time.Duration // before each future event
}

// skewSchedule draws n future and n past events, half of each through
// the gateway and half through Kafka, with skews spread log-uniformly
// from 10 minutes to 80 years ahead and 2 days to 10 years behind start.
func skewSchedule(seed int64, n int, start time.Time, spread time.Duration) skewPlan {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x736b6577))
	logUniform := func(lo, hi time.Duration) time.Duration {
		return time.Duration(math.Exp(math.Log(float64(lo)) + rng.Float64()*(math.Log(float64(hi))-math.Log(float64(lo)))))
	}
	var p skewPlan
	for i := range 2 * n {
		ev := skewEvent{id: fmt.Sprintf("skew-%d-%d", seed, i), kafka: i%2 == 1, future: i < n}
		var at time.Time
		if ev.future {
			at = time.Now().Add(logUniform(10*time.Minute, 80*365*24*time.Hour))
			ev.reason = contract.ReasonClockSkew
			p.gaps = append(p.gaps, time.Duration(rng.Int64N(int64(spread)/int64(n)+1)))
		} else {
			at = start.Add(-logUniform(48*time.Hour, 10*365*24*time.Hour))
			ev.reason = contract.ReasonLate
		}
		body, _ := json.Marshal(contract.Observation{Provider: contract.ProviderAppRuntime, ProviderID: ev.id,
			ResourceFamily: contract.FamilyAppRuntime, ObservedState: "running", ObservedVersion: "sha256:aa"})
		ev.line, _ = json.Marshal(map[string]any{"event_id": ev.id, "event_type": contract.TypeProviderObservation,
			"schema_version": contract.SchemaVersion, "producer": skewProducer, "seq": i + 1,
			"occurred_at": at.UTC().Format(time.RFC3339Nano), "environment": contract.EnvLocalParity, "payload": json.RawMessage(body)})
		if ev.future {
			p.future = append(p.future, ev)
		} else {
			p.past = append(p.past, ev)
		}
	}
	return p
}

// skewSender sends a plan's events: through the gateway (retried while it
// is down, as a producer would) and through a Kafka client.
type skewSender struct {
	t      *testing.T
	ingest *ingest.Client
	kafka  *kgo.Client
	names  contract.Topics
}

func newSkewSender(t *testing.T, s *stack.Stack) *skewSender {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.BrokerAddr()), kgo.RecordRetries(math.MaxInt32))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &skewSender{t: t, ingest: &ingest.Client{URL: s.IngestURL(), APIKey: service.DefaultLocalAPIKey}, kafka: cl, names: contract.DefaultTopics()}
}

// send sends ev and returns an error the test reports.
func (ss *skewSender) send(ctx context.Context, ev skewEvent) error {
	if ev.kafka {
		r := &kgo.Record{Topic: ss.names.Observations, Key: []byte(contract.ProviderAppRuntime + "/" + ev.id), Value: ev.line}
		return ss.kafka.ProduceSync(ctx, r).FirstErr()
	}
	for {
		resp, err := ss.ingest.Post(ctx, [][]byte{ev.line})
		if err == nil {
			if len(resp.Receipts) != 1 {
				return fmt.Errorf("%s: %d receipts", ev.id, len(resp.Receipts))
			}
			rc := resp.Receipts[0]
			if ev.future && (rc.Status != ingest.StatusRejected || rc.Reason != contract.ReasonClockSkew) {
				return fmt.Errorf("%s, ahead: receipt %+v, want rejected %s", ev.id, rc, contract.ReasonClockSkew)
			}
			if !ev.future && rc.Status == ingest.StatusRejected {
				return fmt.Errorf("%s, in the past: receipt %+v, want accepted (the joiner judges lateness)", ev.id, rc)
			}
			return nil
		}
		select { // the gateway is down (a fault): retry
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %v)", ev.id, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// sendFuture sends the plan's future events with its gaps, in the
// background; the returned channel yields the first error (or nil).
func (ss *skewSender) sendFuture(ctx context.Context, p skewPlan) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i, ev := range p.future {
			select {
			case <-time.After(p.gaps[i]):
			case <-ctx.Done():
				done <- ctx.Err()
				return
			}
			if err := ss.send(ctx, ev); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

// sendPast sends the plan's past events.
func (ss *skewSender) sendPast(ctx context.Context, p skewPlan) {
	ss.t.Helper()
	for _, ev := range p.past {
		if err := ss.send(ctx, ev); err != nil {
			ss.t.Fatal(err)
		}
	}
}

// isSkewEvent reports whether an event id is the skewed producer's.
func isSkewEvent(id string) bool { return strings.HasPrefix(id, "skew-") }

// checkSkew checks that every event of p is in the quarantine topic with
// its reason (at least once: a component that crashed before its commit
// quarantines again), that none of them reached drift findings, and that
// the joiner group counted, for the skewed producer, exactly the events it
// judged, and no other producer for clock_skew or late_event: the Kafka-written future events as clock_skew (the gateway
// rejected the others before any record existed) and every past event as
// late_event.
func checkSkew(t *testing.T, ctx context.Context, s *stack.Stack, group string, p skewPlan) {
	t.Helper()
	names := contract.DefaultTopics()
	reasons := map[string]map[contract.Reason]bool{}
	for _, r := range testenv.ReadTopics(t, ctx, []string{s.BrokerAddr()}, 2*time.Second, names.Quarantine)[names.Quarantine] {
		var doc contract.Quarantined
		if err := json.Unmarshal(r.Value, &doc); err != nil {
			t.Fatalf("quarantine record %d@%d: %v", r.Partition, r.Offset, err)
		}
		if isSkewEvent(doc.EventID) {
			if reasons[doc.EventID] == nil {
				reasons[doc.EventID] = map[contract.Reason]bool{}
			}
			reasons[doc.EventID][doc.Reason] = true
		}
	}
	wantCounts := map[contract.Reason]uint64{}
	for _, ev := range append(slices.Clone(p.future), p.past...) {
		if got := reasons[ev.id]; len(got) != 1 || !got[ev.reason] {
			t.Errorf("%s (kafka %v, future %v): quarantined with %v, want %s", ev.id, ev.kafka, ev.future, got, ev.reason)
		}
		if ev.kafka || !ev.future {
			wantCounts[ev.reason]++
		}
	}
	conn := testenv.Open(t, s.ClickHouse())
	rows, err := reader.New(conn, reader.Options{}).ProducerRejections(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Only the skewed producer's clock is wrong: no other producer is
	// counted for a time reason (other reasons are other tests').
	gotCounts := map[contract.Reason]uint64{}
	for _, r := range rows {
		switch reason := contract.Reason(r.Reason); {
		case r.Consumer != group:
		case r.Producer == skewProducer:
			gotCounts[reason] = r.Events
		case reason == contract.ReasonClockSkew || reason == contract.ReasonLate:
			t.Errorf("producer %s counted for %s %d times: only %s is skewed", r.Producer, r.Reason, r.Events, skewProducer)
		}
	}
	if fmt.Sprint(gotCounts) != fmt.Sprint(wantCounts) {
		t.Errorf("counts of %s in %s: %v, want %v", skewProducer, group, gotCounts, wantCounts)
	} else {
		t.Logf("skewed producer: %d future and %d past events quarantined with their reasons; %s counted %v", len(p.future), len(p.past), group, gotCounts)
	}
}

// TestSkewedProducer: while a fleet is fed through the gateway, one
// producer whose clock is wrong by 10 minutes to 80 years ahead, or 2 days
// to 10 years behind, sends events through the gateway and straight to
// Kafka (seeded, DRIFTLINE_FAULT_SEED). The gateway rejects what is ahead
// of its clock, the joiner quarantines what is ahead of its record's
// broker timestamp and what is late; the fleet's findings are exactly the
// generator's truth, and the status endpoint counts the skewed producer.
func TestSkewedProducer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole stack")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin := buildCommands(t, ctx, stack.NameBroker, stack.NameIngest, stack.NameJoiner, stack.NameQuery)
	for _, seed := range seedsFromEnv(t, EnvFaultSeed, defaultFaultSeeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			s := startStack(t, ctx, stack.Options{Dir: t.TempDir(), BinDir: bin, Partitions: crashPartitions,
				Services: []string{stack.NameIngest, stack.NameJoiner, stack.NameQuery}})
			cfg := fleet.DefaultConfig()
			cfg.Seed = seed
			gen, truth := newGenerator(t, cfg)
			plan := skewSchedule(seed, 6, cfg.Start, 2*time.Second)
			ss := newSkewSender(t, s)
			skewDone := ss.sendFuture(ctx, plan)
			stats, err := fleet.Feed(ctx, s.IngestURL(), service.DefaultLocalAPIKey, gen, fleet.FeedOptions{})
			if err != nil {
				t.Fatalf("feed: %v", err)
			}
			if stats.Rejected != 0 {
				t.Fatalf("gateway rejected %d generated events: %s", stats.Rejected, stats.RejectedReceipts)
			}
			if err := <-skewDone; err != nil {
				t.Fatal(err)
			}
			waitGroupCaughtUp(t, s.BrokerAddr(), "driftline-joiner", 3*time.Minute)
			ss.sendPast(ctx, plan)
			waitGroupCaughtUp(t, s.BrokerAddr(), "driftline-joiner", 3*time.Minute)

			conn := testenv.Open(t, s.ClickHouse())
			findings := evidenceFindings(t, ctx, conn, s.ClickHouse().Database)
			if diff := truth.Compare(findings, fleet.CompareOptions{}); !diff.Empty() {
				t.Fatalf("findings differ from the generator's ground truth (%d expected, %d found):\n%s", len(truth.Findings), len(findings), diff)
			}
			t.Logf("%d findings match the ground truth exactly", len(findings))
			checkSkew(t, ctx, s, "driftline-joiner", plan)

			// The status endpoint names the producer.
			st, err := (&client.Client{BaseURL: s.QueryURL(), APIKey: service.DefaultLocalAPIKey}).Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			seen := false
			for _, p := range st.Producers {
				seen = seen || p.Producer == skewProducer
			}
			if !seen {
				t.Errorf("/v1/status producers %+v: %s missing", st.Producers, skewProducer)
			}
		})
	}
}
