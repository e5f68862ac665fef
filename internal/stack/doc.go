// Package stack supervises the local Driftline stack: one ClickHouse
// server, one Kafka-protocol broker (cmd/broker) and the pipeline services
// (cmd/ingest, cmd/joiner, cmd/rater, cmd/query), each a child process with
// its log in Dir/log/<name>.log. cmd/stack is its command line; end-to-end
// tests start the same stack in a temporary directory with free ports, and
// package internal/demo feeds a fleet through it for `stack run`.
//
// Start brings the components up in dependency order and returns only once
// each is ready: ClickHouse answers (installed with apt-get when absent and
// the process runs as root), the read-model migrations are applied, the
// broker serves the contract topics, and every service answers /healthz.
// Stop takes them down in reverse order, each with SIGTERM and a grace
// period before SIGKILL, so services flush and commit before the broker
// and ClickHouse go away. There is no restart policy: a child that exits on
// its own is reported on Exited and in the supervisor's log. Kill,
// StopComponent and StartComponent take one component down (as a crash or
// a stop would) and bring it back on its addresses and data: the fault
// tests of e2e drive them.
//
// All state lives under one directory (default .driftline, git-ignored):
//
//	Dir/broker/         broker topics, records and committed offsets
//	Dir/clickhouse/     ClickHouse config, data and server logs
//	Dir/log/<name>.log  output of each child (stack.log: detached supervisor)
//	Dir/stack.json      the running supervisor's pid, addresses and children
//	Dir/stack.lock      flock held by the running supervisor
//
// Running Start again on the same directory reuses every piece of data, and
// attaches to a ClickHouse server a crashed supervisor left running. Only
// one supervisor runs per directory; Down stops it from another process.
//
// Environment variables read by DefaultOptions (each also reaches the
// services, which read the DRIFTLINE_* settings of pipeline/service):
//
//	DRIFTLINE_DIR                   state directory (.driftline at the root of the checkout)
//	DRIFTLINE_BIN_DIR               directory of the binaries (that of the running executable)
//	DRIFTLINE_ENV                   environment profile (local_parity)
//	DRIFTLINE_BROKERS               broker address; its first entry is where the broker listens (127.0.0.1:19092)
//	DRIFTLINE_PARTITIONS            partitions per topic, fixed at first start (6)
//	DRIFTLINE_BROKER_SYNC           1: broker fsyncs every produced batch (0)
//	DRIFTLINE_CLICKHOUSE_ADDR       ClickHouse native address (127.0.0.1:19000)
//	DRIFTLINE_CLICKHOUSE_HTTP_ADDR  ClickHouse HTTP address (127.0.0.1:18123)
//	DRIFTLINE_CLICKHOUSE_DB         read-model database (reconcile)
//	DRIFTLINE_CLICKHOUSE_USER       ClickHouse user (default)
//	DRIFTLINE_CLICKHOUSE_PASSWORD   ClickHouse password (empty)
//	DRIFTLINE_CLICKHOUSE_SERVER     ClickHouse server binary (found on PATH, /usr/sbin, /usr/bin)
//	DRIFTLINE_INSTALL_CLICKHOUSE    0: never install ClickHouse with apt-get (1)
//	DRIFTLINE_EXTERNAL_CLICKHOUSE   1: use the ClickHouse at DRIFTLINE_CLICKHOUSE_ADDR, start none (0)
//	DRIFTLINE_CLICKHOUSE_CLUSTER    with DRIFTLINE_EXTERNAL_CLICKHOUSE: the cluster of the servers
//	                                DRIFTLINE_CLICKHOUSE_ADDR lists (make cluster-up); the stack migrates
//	                                in cluster mode and the services run with -clickhouse.cluster (none)
//	DRIFTLINE_EXTERNAL_BROKER       1: use the broker at DRIFTLINE_BROKERS, start none (0)
//	DRIFTLINE_INGEST_ADDR           ingest gateway HTTP address (127.0.0.1:18080)
//	DRIFTLINE_QUERY_ADDR            query API HTTP address (127.0.0.1:18081)
//	DRIFTLINE_JOINER_ADDR           joiner health/metrics address (127.0.0.1:18082)
//	DRIFTLINE_RATER_ADDR            rater health/metrics address (127.0.0.1:18083)
//	DRIFTLINE_LOG_LEVEL             log level of every child (info; cmd/stack sets it from -log.level)
//	DRIFTLINE_LOG_FORMAT            log format of every child (text; cmd/stack sets it from -log.format)
package stack
