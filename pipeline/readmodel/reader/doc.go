// Package reader answers the query API's questions from the ClickHouse
// read model: the SQL of every listing, detail, summary and total, and
// the folding of what ClickHouse returns into the answer types of
// package apitypes. It never writes.
//
// Every answer sees exactly the current row per key of the
// ReplacingMergeTree tables, whether or not ClickHouse has merged the
// superseded versions yet: scans read with FINAL; the attention queue,
// drift pages, node pages, drift detail and a node's findings read every
// row of the keys they need, without FINAL, from tables with granules of
// 256 rows (migration 006), and keep each key's current one, as a merge
// would (current.go); pages in an order other than the key find those
// keys by ranking every row version (ranked.go). The heat map, the status
// counts and the attention queue read the summaries the joiner keeps
// (summaries.go).
//
// The SQL runs on ClickHouse 18.16 and on current releases: FINAL with a
// plain WHERE (never PREWHERE, which filters before versions are
// collapsed), no window functions, and every value bound by the client as
// an argument, never spliced into the text.
package reader
