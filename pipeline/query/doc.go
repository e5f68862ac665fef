// Package query serves the read-only query API of the reconciliation
// pipeline (CONTRACT section 7): JSON over HTTP, read from the ClickHouse
// read model, plus a small Go client for it.
//
// Every read of a ReplacingMergeTree table uses FINAL, so each answer sees
// exactly the current row per key, whether or not ClickHouse has merged the
// superseded versions yet. The server never writes.
//
// # Endpoints
//
//	GET /v1/status                reconciliation status (Status)
//	GET /v1/drift                 current findings, one page (DriftPage)
//	GET /v1/drift/{evidence_id}   one finding, its history and recommended action (DriftDetail)
//	GET /v1/heatmap               owning_domain x classification counts (Heatmap)
//	GET /metrics                  Prometheus metrics
//	GET /healthz                  200 when ClickHouse answers a ping, else 503
//
// Times are RFC 3339 in UTC with second precision. A time ClickHouse holds
// as the zero DateTime (1970-01-01T00:00:00Z: never observed, not resolved,
// no retry scheduled) is rendered as null.
//
// # Filters
//
// /v1/drift and /v1/heatmap take the same filters. A filter may repeat or
// hold a comma-separated list; values of one filter are alternatives (OR),
// different filters all apply (AND).
//
//	product          product_id (alias: product_id)
//	resource_family  gpuaas_allocation | app_runtime | storage | model_serving | billing_usage
//	classification   the seven classifications of CONTRACT section 4
//	severity         critical | warning
//	owning_domain    owning_domain
//	domain_id        domain_id
//	provider         maas | node_agent | app_runtime | storage_provider | gateway | billing_ingestion
//	status           open (default) | resolved | all
//	age              Go duration (e.g. 90s, 15m, 2h) greater than zero: only findings
//	                 whose first_seen_at is at or before now - age, where now is the
//	                 server's wall clock. first_seen_at is event time, so on a replay
//	                 of old events every finding is "old".
//
// /v1/drift also takes
//
//	limit   page size, 1..10000, default 100
//	cursor  the next_cursor of the previous page; opaque
//
// Pages are ordered by evidence_id. A page that is not the last carries
// next_cursor; passing it back returns the findings after that page under
// the same filters. Findings that change between pages may move in or out
// of the filter, but no finding is returned twice.
//
// A bad or unknown parameter answers 400 with an ErrorBody naming the
// parameter and, for enumerations, the allowed values. An unknown
// evidence_id answers 404. A failed ClickHouse query answers 503.
package query
