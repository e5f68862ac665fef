// Package chserver finds, installs and runs a ClickHouse server owned by
// the project: the local stack's read model and the test harness's
// database server.
//
// The server is a child process confined to one directory (Options.Dir):
// its config, users, data, temporary files and logs all live there, and it
// listens on 127.0.0.1 only. Start writes a minimal, standard config that
// both Debian's clickhouse-server 18.16 and current ClickHouse releases
// accept, so the same code runs on a developer laptop, in CI and on a
// fresh Debian machine.
//
// Guarantees:
//   - Start returns only once the server answers a query, or an error that
//     carries the tail of the server's log.
//   - A directory holding data from a previous run is reused: restarting
//     keeps every database.
//   - A server still running from a previous Start on the same directory
//     (for example a local stack left running) is attached to, not started
//     twice; a port taken by anything else is an error naming the setting to
//     change.
//   - With Options.DieWithParent the server is killed by the kernel when
//     the starting process dies, so tests never leave servers behind.
//
// The binary is looked up by Find: $DRIFTLINE_CLICKHOUSE_SERVER when set,
// otherwise clickhouse-server or the multi-call clickhouse binary on PATH
// and in /usr/sbin, /usr/bin and /usr/local/bin.
package chserver
