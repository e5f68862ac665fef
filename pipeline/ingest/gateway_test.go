package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	json "github.com/segmentio/encoding/json"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/keys"
)

const testPartitions = 4

// Test API keys.
const (
	fleetKey   = "fleet-key"   // SYSTEM::fleet, every type, any producer
	scannerKey = "scanner-key" // SYSTEM::maas-scanner, observations only, producer maas-scanner-eu1
	revokedKey = "revoked-key"
)

func testKeyring(t *testing.T) *keys.Keyring {
	t.Helper()
	kr, err := keys.NewKeyring([]keys.KeySpec{
		{SHA256: keys.HashKey(fleetKey), Grant: keys.Grant{ActorID: "SYSTEM::fleet", SourceType: contract.SourceSystem, EventTypes: contract.AllTypes}},
		{SHA256: keys.HashKey(scannerKey), Grant: keys.Grant{ActorID: "SYSTEM::maas-scanner", SourceType: contract.SourceSystem,
			EventTypes: []string{contract.TypeProviderObservation, contract.TypeScanCompleted}, Producers: []string{"maas-scanner-eu1"}}},
		{SHA256: keys.HashKey(revokedKey), Grant: keys.Grant{ActorID: "HUMAN::gone", SourceType: contract.SourceHuman, EventTypes: contract.AllTypes, Revoked: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// testEnv is a gateway in front of an in-process kfake broker.
type testEnv struct {
	t       *testing.T
	cluster *kfake.Cluster
	gw      *Gateway
	srv     *httptest.Server
	names   contract.Topics
	adm     *kadm.Client
	admCl   *kgo.Client
}

func newTestEnv(t *testing.T, edit func(*Options)) *testEnv {
	t.Helper()
	cluster, gw, names := newTestGateway(t, io.Discard, edit)
	admCl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, cluster: cluster, gw: gw, srv: httptest.NewServer(gw.Handler()), names: names, adm: kadm.NewClient(admCl), admCl: admCl}
	t.Cleanup(func() {
		e.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = gw.Close(ctx)
		admCl.Close()
		cluster.Close()
	})
	return e
}

// newTestGateway starts a broker holding every topic and a gateway on it,
// its options edited by edit, logging JSON to logs. The caller closes both.
func newTestGateway(t *testing.T, logs io.Writer, edit func(*Options)) (*kfake.Cluster, *Gateway, contract.Topics) {
	t.Helper()
	names := contract.DefaultTopics()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(testPartitions, names.All()...))
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{
		Environment:    contract.EnvLocalParity,
		Brokers:        cluster.ListenAddrs(),
		Topics:         names,
		Keys:           testKeyring(t),
		ProduceTimeout: 5 * time.Second,
		Logger:         slog.New(slog.NewJSONHandler(logs, nil)),
	}
	if edit != nil {
		edit(&opts)
	}
	gw, err := New(opts)
	if err != nil {
		cluster.Close()
		t.Fatal(err)
	}
	return cluster, gw, names
}

func (e *testEnv) client(key string) *Client {
	return &Client{URL: e.srv.URL, APIKey: key, HTTP: e.srv.Client()}
}

func (e *testEnv) post(key string, lines ...[]byte) (Response, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return e.client(key).Post(ctx, lines)
}

func (e *testEnv) mustPost(key string, lines ...[]byte) Response {
	e.t.Helper()
	resp, err := e.post(key, lines...)
	if err != nil {
		e.t.Fatalf("post: %v", err)
	}
	return resp
}

func (e *testEnv) count(topic string) int64 {
	e.t.Helper()
	return recordCount(e.t, e.adm, topic)
}

// recordCount returns the number of records in topic (end offsets; the
// gateway does not write transactions, so offsets are records).
func recordCount(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

func (e *testEnv) countAll() int64 {
	var n int64
	for _, t := range e.names.All() {
		n += e.count(t)
	}
	return n
}

// read consumes topic from the start until want records arrived, polling
// with a deadline; records are in (partition, offset) order.
func (e *testEnv) read(topic string, want int) []*kgo.Record {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.cluster.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			e.t.Fatalf("read %s: got %d records before the deadline, want %d", topic, len(out), want)
		}
		fs.EachError(func(t string, p int32, err error) { e.t.Fatalf("fetch %s/%d: %v", t, p, err) })
		out = append(out, fs.Records()...)
	}
	if len(out) != want {
		e.t.Fatalf("read %s: %d records, want %d", topic, len(out), want)
	}
	slices.SortStableFunc(out, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// --- event builders ---

var occurred = "2026-11-21T10:15:30.123Z"

func envelope(typ, id, producer string, payload map[string]any) map[string]any {
	return map[string]any{
		"event_id": id, "event_type": typ, "schema_version": 1, "producer": producer,
		"occurred_at": occurred, "environment": contract.EnvLocalParity, "payload": payload,
	}
}

func observation(id, providerID string) map[string]any {
	return envelope(contract.TypeProviderObservation, id, "maas-scanner-eu1", map[string]any{
		"provider": "maas", "provider_id": providerID, "resource_family": "gpuaas_allocation", "observed_state": "active",
	})
}

func record(id, providerID string) map[string]any {
	return envelope(contract.TypePlatformRecord, id, "platform", map[string]any{
		"record_type": "node", "record_id": "rec-" + providerID, "record_version": 1, "resource_family": "gpuaas_allocation",
		"provider": "maas", "provider_id": providerID, "expected_state": "active",
	})
}

func heartbeat(id, nodeID string) map[string]any {
	return envelope(contract.TypeHeartbeat, id, "agent-"+nodeID, map[string]any{
		"node_id": nodeID, "agent_version": "1.2.3", "host_fingerprint": "hf-1", "health": "OK",
	})
}

func usage(id, meteringID string) map[string]any {
	return envelope(contract.TypeUsageRecorded, id, "gw-1", map[string]any{
		"usage_id": "u-" + meteringID, "metering_source": "gateway", "metering_id": meteringID, "unit_id": "gpu_hour",
		"quantity": "1.500000", "tenant_id": "t1", "window_start": occurred, "window_end": occurred,
	})
}

func scanCompleted(id, scanID string) map[string]any {
	return envelope(contract.TypeScanCompleted, id, "maas-scanner-eu1", map[string]any{
		"provider": "maas", "scan_id": scanID, "scan_started_at": occurred,
	})
}

func with(m map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for kk, vv := range m {
		out[kk] = vv
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

// enc is v as JSON.
func enc(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// --- tests ---

// Every reason code yields a rejected receipt naming it and one quarantine
// record with that reason header; nothing reaches a data topic.
func TestEachReasonIsQuarantined(t *testing.T) {
	obs := observation("e-1", "node-1")
	for _, tc := range []struct {
		reason contract.Reason
		key    string
		line   func(t *testing.T) []byte
	}{
		{contract.ReasonBadJSON, fleetKey, func(*testing.T) []byte { return []byte(`{"event_id":"e-1",`) }},
		{contract.ReasonOversized, fleetKey, func(t *testing.T) []byte {
			return enc(t, with(obs, "correlation_id", strings.Repeat("x", contract.MaxEventLen)))
		}},
		{contract.ReasonMissingField, fleetKey, func(t *testing.T) []byte { return enc(t, with(obs, "producer", nil)) }},
		{contract.ReasonWrongType, fleetKey, func(t *testing.T) []byte { return enc(t, with(obs, "schema_version", "1")) }},
		{contract.ReasonInvalidField, fleetKey, func(t *testing.T) []byte { return enc(t, with(obs, "occurred_at", "yesterday")) }},
		{contract.ReasonUnknownEventType, fleetKey, func(t *testing.T) []byte { return enc(t, with(obs, "event_type", "provider.rumour")) }},
		{contract.ReasonUnknownSchemaVersion, fleetKey, func(t *testing.T) []byte { return enc(t, with(obs, "schema_version", 2)) }},
		{contract.ReasonWrongEnvironment, fleetKey, func(t *testing.T) []byte { return enc(t, with(obs, "environment", contract.EnvProd)) }},
		{contract.ReasonUnauthorizedType, scannerKey, func(t *testing.T) []byte { return enc(t, usage("e-1", "m-1")) }},
		{contract.ReasonUnauthorizedProducer, scannerKey, func(t *testing.T) []byte { return enc(t, with(obs, "producer", "someone-else")) }},
		{contract.ReasonClockSkew, fleetKey, func(t *testing.T) []byte {
			return enc(t, with(obs, "occurred_at", time.Now().Add(DefaultMaxClockSkew+time.Minute).UTC().Format(time.RFC3339Nano)))
		}},
	} {
		t.Run(string(tc.reason), func(t *testing.T) {
			e := newTestEnv(t, nil)
			line := tc.line(t)
			resp := e.mustPost(tc.key, line)
			if resp.Rejected != 1 || resp.Accepted != 0 || len(resp.Receipts) != 1 {
				t.Fatalf("response %+v, want one rejected line", resp)
			}
			rc := resp.Receipts[0]
			if rc.Status != StatusRejected || rc.Reason != tc.reason || rc.Line != 1 || rc.Detail == "" {
				t.Fatalf("receipt %+v, want rejected %s", rc, tc.reason)
			}
			if resp.PolicyRev != e.gw.PolicyRev() {
				t.Fatalf("policy_rev %q, want %q", resp.PolicyRev, e.gw.PolicyRev())
			}
			q := e.read(e.names.Quarantine, 1)[0]
			if got := header(q, contract.HeaderReason); got != string(tc.reason) {
				t.Fatalf("quarantine reason header %q, want %q", got, tc.reason)
			}
			var doc contract.Quarantined
			if err := json.Unmarshal(q.Value, &doc); err != nil {
				t.Fatalf("quarantine value: %v", err)
			}
			wantActor := map[string]string{fleetKey: "SYSTEM::fleet", scannerKey: "SYSTEM::maas-scanner"}[tc.key]
			if doc.Reason != tc.reason || doc.ActorID != wantActor || doc.ReceivedAt == "" || doc.LineBytes != len(line) ||
				!strings.HasPrefix(string(line), doc.Line) || doc.Truncated != (len(line) > DefaultQuarantineLineLimit) {
				t.Fatalf("quarantine value %+v does not describe the line", doc)
			}
			if header(q, contract.HeaderActorID) != wantActor || header(q, contract.HeaderPolicyRev) != e.gw.PolicyRev() {
				t.Fatalf("quarantine headers %v", q.Headers)
			}
			if n := e.countAll() - e.count(e.names.Quarantine); n != 0 {
				t.Fatalf("%d records reached data topics", n)
			}
		})
	}
}

// A mixed batch: good lines land on their topic, key and murmur2 partition
// with identity headers; bad lines are quarantined; receipts follow lines.
func TestMixedBatch(t *testing.T) {
	e := newTestEnv(t, nil)
	lines := [][]byte{
		enc(t, observation("obs-1", "node-1")),
		[]byte(`not json`),
		enc(t, record("rec-1", "node-1")),
		{},
		enc(t, heartbeat("hb-1", "node-1")),
		enc(t, with(usage("u-1", "m-1"), "environment", contract.EnvDev)),
		enc(t, usage("u-2", "m-2")),
	}
	resp := e.mustPost(fleetKey, lines...)
	if resp.Accepted != 4 || resp.Rejected != 2 || resp.Duplicate != 0 {
		t.Fatalf("counts %+v", resp)
	}
	want := []struct {
		line   int
		status Status
		reason contract.Reason
		id     string
	}{
		{1, StatusAccepted, "", "obs-1"}, {2, StatusRejected, contract.ReasonBadJSON, ""}, {3, StatusAccepted, "", "rec-1"},
		{5, StatusAccepted, "", "hb-1"}, {6, StatusRejected, contract.ReasonWrongEnvironment, "u-1"}, {7, StatusAccepted, "", "u-2"},
	}
	if len(resp.Receipts) != len(want) {
		t.Fatalf("%d receipts, want %d", len(resp.Receipts), len(want))
	}
	for i, w := range want {
		if rc := resp.Receipts[i]; rc.Line != w.line || rc.Status != w.status || rc.Reason != w.reason || rc.EventID != w.id {
			t.Errorf("receipt %d = %+v, want %+v", i, rc, w)
		}
	}

	check := func(topic, key string, line []byte) int32 {
		t.Helper()
		r := e.read(topic, 1)[0]
		if string(r.Key) != key || !bytes.Equal(r.Value, line) {
			t.Fatalf("%s: key %q value %s; want key %q and the original line", topic, r.Key, r.Value, key)
		}
		if want := contract.Partition(r.Key, testPartitions); r.Partition != want {
			t.Fatalf("%s: partition %d, murmur2 says %d", topic, r.Partition, want)
		}
		if header(r, contract.HeaderActorID) != "SYSTEM::fleet" || header(r, contract.HeaderSourceType) != contract.SourceSystem ||
			header(r, contract.HeaderPolicyRev) != e.gw.PolicyRev() {
			t.Fatalf("%s: headers %v", topic, r.Headers)
		}
		return r.Partition
	}
	p1 := check(e.names.Observations, "maas/node-1", lines[0])
	p2 := check(e.names.PlatformRecords, "maas/node-1", lines[2])
	p3 := check(e.names.Telemetry, "maas/node-1", lines[4])
	if p1 != p2 || p2 != p3 {
		t.Fatalf("co-partitioned identity split over partitions %d %d %d", p1, p2, p3)
	}
	check(e.names.Usage, "gateway/m-2", lines[6])

	var reasons []string
	for _, q := range e.read(e.names.Quarantine, 2) {
		reasons = append(reasons, header(q, contract.HeaderReason))
	}
	slices.Sort(reasons)
	if !slices.Equal(reasons, []string{string(contract.ReasonBadJSON), string(contract.ReasonWrongEnvironment)}) {
		t.Fatalf("quarantine reasons %v", reasons)
	}
	if e.count(e.names.Usage) != 1 {
		t.Fatal("the wrong-environment usage line reached the usage topic")
	}

	metrics := e.get("/metrics")
	for _, s := range []string{
		`driftline_ingest_events_accepted_total{topic="usage.events"} 1`,
		`driftline_ingest_events_rejected_total{reason="bad_json"} 1`,
		`driftline_ingest_request_duration_seconds_count{code="200"} 1`,
	} {
		if !strings.Contains(metrics, s) {
			t.Errorf("metrics lack %s", s)
		}
	}
}

func (e *testEnv) get(path string) string {
	e.t.Helper()
	code, body := e.fetch(path)
	if code != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, code, body)
	}
	return body
}

// fetch GETs path and returns the status code and body, whatever they are.
func (e *testEnv) fetch(path string) (int, string) {
	e.t.Helper()
	res, err := e.srv.Client().Get(e.srv.URL + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// Lines of one request for one key keep their order in the partition.
func TestOrderWithinPartition(t *testing.T) {
	e := newTestEnv(t, nil)
	var lines [][]byte
	for i := range 50 {
		lines = append(lines, enc(t, observation(fmt.Sprintf("obs-%02d", i), "node-7")))
	}
	if resp := e.mustPost(scannerKey, lines...); resp.Accepted != 50 {
		t.Fatalf("accepted %d", resp.Accepted)
	}
	for i, r := range e.read(e.names.Observations, 50) {
		if !bytes.Equal(r.Value, lines[i]) {
			t.Fatalf("record %d is %s, want line %d", i, r.Value, i+1)
		}
	}
}

func TestAuthFailuresWriteNothing(t *testing.T) {
	e := newTestEnv(t, nil)
	line := enc(t, observation("obs-1", "node-1"))
	for _, tc := range []struct{ name, key string }{{"missing", ""}, {"unknown", "wrong-key"}, {"revoked", revokedKey}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.post(tc.key, line)
			var se *StatusError
			if !errors.As(err, &se) || se.StatusCode != http.StatusUnauthorized || se.Code != "unauthorized" || se.Retryable() {
				t.Fatalf("err = %v, want 401 unauthorized", err)
			}
		})
	}
	if n := e.countAll(); n != 0 {
		t.Fatalf("%d records written for unauthenticated requests", n)
	}
	m := e.get("/metrics")
	for _, k := range []string{"missing", "unknown", "revoked"} {
		if s := `driftline_ingest_auth_failures_total{kind="` + k + `"} 1`; !strings.Contains(m, s) {
			t.Errorf("metrics lack %s", s)
		}
	}
}

func TestScanCompletedFansOut(t *testing.T) {
	e := newTestEnv(t, nil)
	line := enc(t, scanCompleted("scan-end-1", "s-1"))
	resp := e.mustPost(scannerKey, line)
	if resp.Accepted != 1 || resp.Receipts[0].Status != StatusAccepted {
		t.Fatalf("response %+v", resp)
	}
	recs := e.read(e.names.Observations, testPartitions)
	for p, r := range recs {
		if r.Partition != int32(p) || string(r.Key) != "maas/scan/s-1" || !bytes.Equal(r.Value, line) || header(r, contract.HeaderPolicyRev) == "" {
			t.Fatalf("copy %d: partition %d key %q", p, r.Partition, r.Key)
		}
	}
	if m := e.get("/metrics"); !strings.Contains(m, `driftline_ingest_events_accepted_total{topic="provider.observations"} 1`) {
		t.Error("a fanned-out marker must count as one accepted event")
	}
}

// The fleet registry's events go to every partition of platform.records,
// keyed by their own id, and count as one accepted event each.
func TestFleetRegistryFansOut(t *testing.T) {
	e := newTestEnv(t, nil)
	art := enc(t, envelope(contract.TypeArtifact, "art-ev-1", "registry", map[string]any{
		"artifact_id": "art-1", "version": "2.0", "digest": "sha256:" + strings.Repeat("ab", 32), "revoked": false,
	}))
	bundle := enc(t, envelope(contract.TypePolicyBundle, "pb-ev-1", "registry", map[string]any{
		"policy_bundle_id": "pb-1", "target_version": "2.0", "artifact_id": "art-1", "domains": []string{"dom-1"}, "deadline": occurred,
	}))
	resp := e.mustPost(fleetKey, art, bundle)
	if resp.Accepted != 2 {
		t.Fatalf("response %+v", resp)
	}
	recs := e.read(e.names.PlatformRecords, 2*testPartitions)
	perPartition := map[int32][]string{}
	for _, r := range recs {
		perPartition[r.Partition] = append(perPartition[r.Partition], string(r.Key))
		if want := map[string][]byte{"artifact/art-1": art, "bundle/pb-1": bundle}[string(r.Key)]; !bytes.Equal(r.Value, want) {
			t.Fatalf("partition %d key %q holds %s", r.Partition, r.Key, r.Value)
		}
	}
	for p := range int32(testPartitions) {
		if got := perPartition[p]; len(got) != 2 || got[0] != "artifact/art-1" || got[1] != "bundle/pb-1" {
			t.Errorf("partition %d holds %v, want the artifact then the bundle", p, got)
		}
	}
	if m := e.get("/metrics"); !strings.Contains(m, `driftline_ingest_events_accepted_total{topic="platform.records"} 2`) {
		t.Error("each fanned-out registry event must count as one accepted event")
	}
	// A bad digest is rejected by the gateway with the field named.
	bad := enc(t, envelope(contract.TypeArtifact, "art-ev-2", "registry", map[string]any{
		"artifact_id": "art-2", "version": "2.0", "digest": "md5:00",
	}))
	if r := e.mustPost(fleetKey, bad); r.Rejected != 1 || r.Receipts[0].Reason != contract.ReasonInvalidField || r.Receipts[0].Field != "payload.digest" {
		t.Fatalf("bad digest: %+v", r)
	}
}

func TestDuplicates(t *testing.T) {
	e := newTestEnv(t, nil)
	a := enc(t, observation("obs-1", "node-1"))
	b := enc(t, with(observation("obs-2", "node-2"), "seq", 7))
	c := enc(t, scanCompleted("scan-end-1", "s-1"))
	first := e.mustPost(scannerKey, a, b, c, a) // the repeated line is a duplicate already
	if first.Accepted != 3 || first.Duplicate != 1 || first.Receipts[3].Status != StatusDuplicate {
		t.Fatalf("first response %+v", first)
	}
	before := e.count(e.names.Observations)
	if before != 2+testPartitions {
		t.Fatalf("%d observation records, want %d", before, 2+testPartitions)
	}

	// Same (producer, seq) under another event_id is the same event.
	bAgain := enc(t, with(observation("obs-2-redelivered", "node-2"), "seq", 7))
	second := e.mustPost(scannerKey, a, bAgain, c)
	if second.Accepted != 0 || second.Duplicate != 3 {
		t.Fatalf("retry response %+v, want 3 duplicates", second)
	}
	for _, rc := range second.Receipts {
		if rc.Status != StatusDuplicate || rc.EventID == "" {
			t.Fatalf("receipt %+v", rc)
		}
	}
	if after := e.count(e.names.Observations); after != before {
		t.Fatalf("retry wrote %d more records", after-before)
	}
}

// An event that reuses an accepted identity with other content is
// rejected as conflicting_duplicate; its copies in the same request are
// rejected with it, never answered duplicate of an event the gateway did
// not accept. A copy of the accepted event in that request is still a
// duplicate.
func TestRepeatedConflictIsRejected(t *testing.T) {
	e := newTestEnv(t, nil)
	accepted := enc(t, observation("obs-1", "node-1"))
	if r := e.mustPost(scannerKey, accepted); r.Accepted != 1 {
		t.Fatalf("first post: %+v", r)
	}
	before := e.count(e.names.Observations)
	conflict := enc(t, observation("obs-1", "node-2")) // same (producer, event_id), other content
	r := e.mustPost(scannerKey, conflict, conflict, accepted)
	if r.Accepted != 0 || r.Duplicate != 1 || r.Rejected != 2 {
		t.Fatalf("counts accepted %d duplicate %d rejected %d, want 0/1/2: %+v", r.Accepted, r.Duplicate, r.Rejected, r.Receipts)
	}
	for i, rc := range r.Receipts[:2] {
		if rc.Status != StatusRejected || rc.Reason != contract.ReasonConflictingDuplicate || rc.Field != "event_id" ||
			rc.FirstDigest == "" || rc.FirstDigest != r.Receipts[0].FirstDigest || rc.Digest != r.Receipts[0].Digest {
			t.Errorf("receipt %d: %+v, want rejected conflicting_duplicate with the digests of line 1", i, rc)
		}
	}
	if rc := r.Receipts[2]; rc.Status != StatusDuplicate {
		t.Errorf("receipt of the accepted event's copy: %+v, want duplicate", rc)
	}
	for _, q := range e.read(e.names.Quarantine, 2) {
		if got := header(q, contract.HeaderReason); got != string(contract.ReasonConflictingDuplicate) {
			t.Errorf("quarantine reason header %q", got)
		}
	}
	if after := e.count(e.names.Observations); after != before {
		t.Fatalf("the request wrote %d observation records, want none", after-before)
	}
}

func TestBrokerDownAnswers503(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.ProduceTimeout = time.Second })
	if got := e.get("/healthz"); !strings.HasPrefix(got, "ok") {
		t.Fatalf("healthz %q", got)
	}
	e.cluster.Close()
	_, err := e.post(fleetKey, enc(t, observation("obs-1", "node-1")), []byte("bad"))
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusServiceUnavailable || se.Code != "unavailable" || se.RetryAfter <= 0 || !se.Retryable() {
		t.Fatalf("err = %v, want 503 unavailable with Retry-After", err)
	}
	if code, _ := e.fetch("/healthz"); code != http.StatusServiceUnavailable {
		t.Fatalf("healthz with the broker down: %d", code)
	}
}

func TestBodyLimits(t *testing.T) {
	e := newTestEnv(t, func(o *Options) { o.MaxBodyBytes = 4 << 10 })
	var lines [][]byte
	for i := range 40 {
		lines = append(lines, enc(t, observation(fmt.Sprint("obs-", i), "node-1")))
	}
	_, err := e.post(fleetKey, lines...)
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("err = %v, want 413", err)
	}
	_, err = e.post(fleetKey, []byte("   "))
	if !errors.As(err, &se) || se.StatusCode != http.StatusBadRequest {
		t.Fatalf("blank body: err = %v, want 400", err)
	}
	if n := e.countAll(); n != 0 {
		t.Fatalf("%d records written for unusable bodies", n)
	}
}
