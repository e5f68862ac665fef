package contract

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestQuarantinedFields pins the JSON names readers of ingest.quarantine
// see: every field of the gateway's and the consumers' records.
func TestQuarantinedFields(t *testing.T) {
	q := Quarantined{Reason: ReasonBadJSON, Field: "payload.quota", Detail: "d", EventID: "e1", ActorID: "SYSTEM::rater",
		SourceType: SourceSystem, PolicyRev: "rev", OriginActorID: "SYSTEM::fleet", ReceivedAt: "2026-11-21T10:15:30Z"}
	q.SetLine([]byte(strings.Repeat("x", 10)), 4)
	q.SetSource("usage.events", 3, 42)
	b, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"actor_id", "detail", "event_id", "field", "line", "line_bytes", "origin_actor_id", "policy_rev", "reason",
		"received_at", "source_offset", "source_partition", "source_topic", "source_type", "truncated"}
	if !slices.Equal(keys, want) {
		t.Fatalf("fields %v, want %v", keys, want)
	}
	if m["line"] != "xxxx" || m["truncated"] != true || m["line_bytes"] != 10.0 || m["source_partition"] != 3.0 || m["source_offset"] != 42.0 {
		t.Fatalf("value %s", b)
	}

	// A gateway line: no source, nothing cut; the line limit keeps
	// invalid UTF-8 out of the record.
	var g Quarantined
	g.SetLine([]byte("ab\xffc"), 100)
	if g.Line != "ab\uFFFDc" || g.Truncated || g.LineBytes != 4 || g.SourcePartition != nil {
		t.Fatalf("gateway line %+v", g)
	}
	if b, _ := json.Marshal(g); strings.Contains(string(b), "source_partition") || strings.Contains(string(b), "truncated") {
		t.Fatalf("gateway value %s", b)
	}
}
