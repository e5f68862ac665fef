package joiner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
	"github.com/driftline/driftline/pipeline/ingest"
	"github.com/driftline/driftline/pipeline/readmodel/reader"
	"github.com/driftline/driftline/pipeline/stream/streamtest"
)

// TestRedeliveriesAndConflictsProperty is the seeded property of exact
// dedupe with content: producers send events through the ingest gateway
// (HTTP) and straight to Kafka, redeliver some (byte for byte, or
// re-serialised with another key order) and conflict on others (the same
// seq with other content, under the same event_id or a new one), each
// repeat after its first copy was acknowledged. A model follows what the
// gateway remembers (the first content it accepted under an identity) and
// what the joiner applied (the first to reach Kafka). Whatever the path,
// every conflict ends up quarantined (by the gateway or by the joiner)
// and counted, never applied, and every redelivery is answered duplicate
// by the gateway or counted once as a duplicate by the joiner; exactly
// the first copies are applied. DRIFTLINE_CONFLICT_SEED replays one seed.
func TestRedeliveriesAndConflictsProperty(t *testing.T) {
	seed := uint64(time.Now().UnixNano() % 1000)
	if v := os.Getenv("DRIFTLINE_CONFLICT_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seed = s
	}
	t.Logf("seed %d (replay with DRIFTLINE_CONFLICT_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 31))

	f := newFixture(t)
	const group = "joiner-conflict-property"
	gw, err := ingest.New(ingest.Options{Environment: contract.EnvLocalParity, Brokers: f.brokers, Topics: f.names,
		Keys: keys.LocalKeyring("k"), ProduceTimeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler),
		Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	defer gw.Close(context.Background())
	client := &ingest.Client{URL: srv.URL, APIKey: "k", HTTP: srv.Client()}

	// Each event is an inert platform record: a private identity whose
	// expected state is absent-expecting and that nobody observes, so it
	// raises no finding, whatever content it is applied with.
	type event struct {
		producer string
		seq      uint64
		line     []byte
	}
	states := []string{"released", "deleted", "decommissioned", "retired"} // absent-expecting
	newLine := func(producer, eventID string, seq uint64, id, state string, version int64) []byte {
		rec := record(id, state)
		rec.ProviderID, rec.RecordID, rec.RecordVersion = id, "rec-"+id, version
		r := streamtest.Event(t, f.names, contract.TypePlatformRecord, producer, seq, t0.Add(time.Duration(seq)*time.Second), rec)
		return bytes.Replace(r.Value, []byte(`"event_id":"`+producer+`-`), []byte(`"event_id":"`+eventID+`-`), 1)
	}
	reorder := func(line []byte) []byte {
		var doc map[string]any
		if err := json.Unmarshal(line, &doc); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(doc) // sorted keys: another order than the fixture's
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var viaHTTPDuplicate, viaHTTPConflict, joinerDuplicates, joinerConflicts, fresh int
	key := func(line []byte) []byte {
		_, p, verr := contract.Validator{}.DecodeEvent(line)
		if verr != nil {
			t.Fatalf("invalid fixture line: %v", verr)
		}
		return []byte(contract.KeyOf(p))
	}
	sendKafka := func(line []byte) {
		t.Helper()
		if err := f.cl.ProduceSync(context.Background(), &kgo.Record{Topic: f.names.PlatformRecords, Key: key(line), Value: line}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sendHTTP := func(line []byte) ingest.Receipt {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := client.Post(ctx, [][]byte{line})
		if err != nil || len(resp.Receipts) != 1 {
			t.Fatalf("post: %v %+v", err, resp)
		}
		return resp.Receipts[0]
	}
	// The model: what the gateway and the joiner hold under each
	// identity (the content first accepted, resp. first applied), and
	// what each repeat must come to.
	gateway, joiner := map[string]string{}, map[string]string{}
	send := func(op int, id, content string, line []byte, viaHTTP bool) {
		t.Helper()
		if viaHTTP {
			rc := sendHTTP(line)
			switch first, ok := gateway[id]; {
			case !ok:
				if rc.Status != ingest.StatusAccepted {
					t.Fatalf("op %d: %s new to the gateway: %+v", op, id, rc)
				}
				gateway[id] = content
			case first == content:
				if rc.Status != ingest.StatusDuplicate {
					t.Fatalf("op %d: %s redelivered to the gateway: %+v", op, id, rc)
				}
				viaHTTPDuplicate++
				return
			default:
				if rc.Status != ingest.StatusRejected || rc.Reason != contract.ReasonConflictingDuplicate || rc.FirstDigest == "" || rc.FirstDigest == rc.Digest {
					t.Fatalf("op %d: %s in conflict at the gateway: %+v", op, id, rc)
				}
				viaHTTPConflict++
				return
			}
		} else {
			sendKafka(line)
		}
		switch first, ok := joiner[id]; {
		case !ok:
			joiner[id] = content
			fresh++
		case first == content:
			joinerDuplicates++
		default:
			joinerConflicts++
		}
	}
	var sent []event
	seqs := map[string]uint64{}
	for i := range 300 {
		producer := fmt.Sprintf("p%d", rng.IntN(4))
		viaHTTP := rng.IntN(2) == 0
		switch x := rng.IntN(10); {
		case x < 5 || len(sent) == 0: // a new event
			seqs[producer]++
			e := event{producer: producer, seq: seqs[producer]}
			e.line = newLine(producer, producer, e.seq, fmt.Sprintf("%s-%d", producer, e.seq), states[rng.IntN(len(states))], 1)
			sent = append(sent, e)
			send(i, producer+"/"+strconv.FormatUint(e.seq, 10), "first", e.line, viaHTTP)
		case x < 8: // a redelivery, as it was or re-serialised
			e := sent[rng.IntN(len(sent))]
			line := e.line
			if rng.IntN(2) == 0 {
				line = reorder(line)
			}
			send(i, e.producer+"/"+strconv.FormatUint(e.seq, 10), "first", line, viaHTTP)
		default: // a conflict: the seq again with another content
			e := sent[rng.IntN(len(sent))]
			eventID := e.producer
			if rng.IntN(2) == 0 {
				eventID = "reused"
			}
			// The same identity key (so the same partition: a consumer
			// dedupes per partition), another record version.
			line := newLine(e.producer, eventID, e.seq, fmt.Sprintf("%s-%d", e.producer, e.seq), states[rng.IntN(len(states))], int64(i+2))
			send(i, e.producer+"/"+strconv.FormatUint(e.seq, 10), "conflict-"+strconv.Itoa(i), line, viaHTTP)
		}
	}
	t.Logf("%d events; redeliveries: %d answered duplicate by the gateway, %d for the joiner; conflicts: %d rejected by the gateway, %d for the joiner",
		fresh, viaHTTPDuplicate, joinerDuplicates, viaHTTPConflict, joinerConflicts)
	if joinerConflicts == 0 || viaHTTPConflict == 0 || joinerDuplicates == 0 || viaHTTPDuplicate == 0 {
		t.Fatalf("seed %d does not exercise every path", seed)
	}

	reg := prometheus.NewRegistry()
	stop := f.start(group, f.restartable()(reg))
	f.caughtUp(group)
	stop()

	f.wantFindings(nil)
	d, c := int(mustCounter(t, reg, "driftline_joiner_duplicates_total")), int(mustCounter(t, reg, "driftline_joiner_conflicting_duplicates_total"))
	if d != joinerDuplicates || c != joinerConflicts {
		t.Fatalf("joiner: %d duplicates, %d conflicts; want %d and %d", d, c, joinerDuplicates, joinerConflicts)
	}
	// Every conflict is in the quarantine, once: the gateway's and the
	// joiner's.
	byActor := map[string]int{}
	for _, r := range f.quarantined(viaHTTPConflict + joinerConflicts) {
		h := headersOf(r)
		if h[contract.HeaderReason] != string(contract.ReasonConflictingDuplicate) {
			t.Fatalf("quarantine record with headers %v", h)
		}
		byActor[h[contract.HeaderActorID]]++
	}
	if byActor[keys.LocalActorID] != viaHTTPConflict || byActor["SYSTEM::joiner"] != joinerConflicts {
		t.Fatalf("quarantined by actor %v; want %d by the gateway, %d by the joiner", byActor, viaHTTPConflict, joinerConflicts)
	}
	rd := reader.New(f.ch, reader.Options{})
	rows, err := rd.ProducerRejections(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	counted := 0
	for _, r := range rows {
		if r.Consumer != group || r.Reason != string(contract.ReasonConflictingDuplicate) {
			t.Fatalf("producer rejection %+v", r)
		}
		counted += int(r.Events)
	}
	if counted != joinerConflicts {
		t.Fatalf("producer rejections %+v: %d conflicts counted, want %d", rows, counted, joinerConflicts)
	}
	// Exactly the first copies were applied.
	progress, err := rd.Progress(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	for _, p := range progress {
		if p.Consumer == group {
			applied += int(p.Events)
		}
	}
	if applied != fresh {
		t.Fatalf("%d events applied, want the %d first copies", applied, fresh)
	}
}
