package readmodel

import "testing"

func TestReplicatedEngine(t *testing.T) {
	f := func(engineFull, want string) {
		t.Helper()
		got, err := replicated(engineFull, "db", "t")
		if err != nil {
			t.Fatalf("%s: %v", engineFull, err)
		}
		if got != want {
			t.Errorf("%s:\n got %s\nwant %s", engineFull, got, want)
		}
	}
	f("ReplacingMergeTree(version) ORDER BY id SETTINGS index_granularity = 256",
		"ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/db/t', '{replica}', version) ORDER BY id SETTINGS index_granularity = 256")
	f("ReplacingMergeTree PARTITION BY toYYYYMM(day) ORDER BY (tenant_id, usage_id)",
		"ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/db/t', '{replica}') PARTITION BY toYYYYMM(day) ORDER BY (tenant_id, usage_id)")
	f("MergeTree() PARTITION BY toYYYYMM(at) ORDER BY (at, at_us, request_id)",
		"ReplicatedMergeTree('/clickhouse/tables/{shard}/db/t', '{replica}') PARTITION BY toYYYYMM(at) ORDER BY (at, at_us, request_id)")
	if _, err := replicated("Memory", "db", "t"); err == nil {
		t.Error("Memory: no error")
	}
}

func TestViewOnCluster(t *testing.T) {
	tables := map[string]tableDef{
		"drift_evidence":       {engine: "ReplacingMergeTree"},
		"drift_evidence_marks": {engine: "ReplacingMergeTree"},
	}
	v := tableDef{name: "drift_evidence_marks_mv", engine: "MaterializedView",
		create: "CREATE MATERIALIZED VIEW s_x.drift_evidence_marks_mv TO s_x.drift_evidence_marks ( evidence_id String) AS SELECT evidence_id FROM s_x.drift_evidence WHERE (cityHash64(evidence_id) % 1024) = 0"}
	got, err := viewOnCluster(v, "rc", "c1", tables)
	if err != nil {
		t.Fatal(err)
	}
	want := "CREATE MATERIALIZED VIEW IF NOT EXISTS rc.drift_evidence_marks_mv ON CLUSTER c1 TO rc.drift_evidence_marks_local ( evidence_id String) AS SELECT evidence_id FROM rc.drift_evidence_local WHERE (cityHash64(evidence_id) % 1024) = 0"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestShardingKey(t *testing.T) {
	for _, c := range []struct {
		t    tableDef
		want string
	}{
		{tableDef{name: "drift_history", sortingKey: "evidence_id, version"}, "cityHash64(evidence_id)"},
		{tableDef{name: "finding_counts", sortingKey: "partition, owning_domain"}, "cityHash64(partition, owning_domain)"},
	} {
		if got := shardingKey(c.t); got != c.want {
			t.Errorf("%s: %s, want %s", c.t.name, got, c.want)
		}
	}
}
