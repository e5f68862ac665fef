package chserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterConfig checks what a cluster member's config says: every
// shard with internal replication, ZooKeeper, its macros, the DDL queue,
// its interserver port, and the profile settings 18.16 needs.
func TestClusterConfig(t *testing.T) {
	dir := t.TempDir()
	o := Options{TCPPort: 1, HTTPPort: 2, InterserverPort: 3, LogLevel: "information", CacheSize: 1, MaxMemory: 1,
		Cluster: &Cluster{Name: "c1", Shards: [][]string{{"127.0.0.1:10", "127.0.0.1:11"}, {"127.0.0.1:12", "127.0.0.1:13"}},
			ZooKeeper: []string{"127.0.0.1:9"}, Shard: "02", Replica: "r1"}}
	if err := writeConfig(dir, o); err != nil {
		t.Fatal(err)
	}
	config, _ := os.ReadFile(filepath.Join(dir, configFile))
	users, _ := os.ReadFile(filepath.Join(dir, usersFile))
	for _, want := range []string{
		"<c1>", "<internal_replication>true</internal_replication>",
		"<replica><host>127.0.0.1</host><port>13</port></replica>",
		"<node><host>127.0.0.1</host><port>9</port></node>",
		"<shard>02</shard>", "<replica>r1</replica>",
		"<interserver_http_port>3</interserver_http_port>",
		"<path>/clickhouse/task_queue/ddl</path>",
	} {
		if !strings.Contains(string(config), want) {
			t.Errorf("config lacks %s:\n%s", want, config)
		}
	}
	if n := strings.Count(string(config), "<shard>\n"); n != 2 {
		t.Errorf("config has %d shards, want 2", n)
	}
	for _, want := range []string{
		"<low_cardinality_allow_in_native_format>1<", "<allow_experimental_low_cardinality_type>1<",
		"<load_balancing>in_order<", "<background_pool_size>4<",
	} {
		if !strings.Contains(string(users), want) {
			t.Errorf("users lack %s:\n%s", want, users)
		}
	}
	if strings.Contains(string(users), "random") || strings.Contains(string(users), "native_format>0<") {
		t.Errorf("a cluster member's profiles keep a single server's setting:\n%s", users)
	}

	// A single server's config has none of it.
	o.Cluster = nil
	if err := writeConfig(dir, o); err != nil {
		t.Fatal(err)
	}
	config, _ = os.ReadFile(filepath.Join(dir, configFile))
	if strings.Contains(string(config), "remote_servers") || strings.Contains(string(config), "zookeeper") {
		t.Errorf("a single server's config names a cluster:\n%s", config)
	}
}
