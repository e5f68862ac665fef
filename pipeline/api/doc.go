// Package api serves the read-only query API of the reconciliation
// pipeline (CONTRACT section 7): JSON over HTTP, read from the ClickHouse
// read model. The server writes nothing but its audit log.
//
// Every request but /healthz and the UI's files is authenticated by its
// bearer key and authorised by the key's roles (package access,
// docs/access.md): 401 without a valid key, 403 without a role the
// endpoint needs; a finance key's tenant scope hides other tenants' rows
// in every billing read. Every answer carries Driftline-Policy-Rev and
// Driftline-Request-Id; a failed read answers 503 with the request id,
// never ClickHouse's text.
//
// The package holds the HTTP server and its handlers: parameters and
// filters, paging cursors, read-your-writes waits and the JSON answers,
// and the query service's settings (Config: its flags, checks and
// setup functions) and run (Server.Serve) that cmd/query wires. Beside it:
//
//	access    who may call what: principal, roles, scopes, audit log
//	apitypes  the answers' Go types and the vocabulary they carry
//	client    a Go client for the API (cmd/driftctl is built on it)
//	export    Arrow IPC, Parquet and CSV encodings of the listings
//	web       the web UI served under /ui/
//
// The handlers read through the ReadModel interface; package
// pipeline/readmodel/reader implements it with the SQL, and documents how
// every answer sees exactly the current row of each key.
//
// # Endpoints
//
//	GET /v1/status                reconciliation status (Status), with per-producer rejections
//	GET /v1/drift                 current findings, one page (DriftPage)
//	GET /v1/drift/{evidence_id}   one finding, its history and recommended action (DriftDetail)
//	GET /v1/heatmap               owning_domain x classification counts (Heatmap)
//	GET /v1/attention             attention queue: top N open findings and nodes, global and per domain (Attention)
//	GET /v1/connectivity          node counts per connectivity mode, overall and per domain (Connectivity)
//	GET /v1/nodes                 node-agent evidence and gates, one page (NodePage)
//	GET /v1/nodes/{node_id}       one node: gate, desired vs observed, its findings and their history, and the
//	                              fleet core's panels: lifecycle, authority, supply chain, replay, diff, recent events (NodeDetail)
//	GET /v1/nodes/{node_id}/timeline  the node's lifecycle transitions, newest first (Timeline)
//	GET /v1/rollouts              rollout counts per policy bundle and domain (Rollouts)
//	GET /v1/relays                relay topology per domain: nodes, worst seconds behind, backlog (Relays)
//	GET /v1/syncdebt              sync debt per domain, relay and minute of event time (SyncDebt)
//	GET /v1/billing/mismatches    billing mismatches, one page, with exact totals at risk (BillingPage)
//	GET /v1/billing/rated         rated totals by tenant, product, unit and day (RatedTotals)
//	GET /v1/billing/automation    is financial automation stopped for tenant_id (and product_id) (Automation)
//	GET /v1/billing/conservation  billing conservation windows, newest first (ConservationPage)
//	GET /v1/bundle                evidence bundle of an incident as an Arrow IPC file or Parquet file (audited)
//	GET /v1/session               the caller's actor, roles, scopes and endpoints (Session)
//	GET /v1/audit                 the audit log, newest first, for auditors (AuditPage)
//	GET /ui/                      the web UI (embedded static files; / redirects here)
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
//	classification   the classifications of CONTRACT section 4 and 8.3
//	severity         critical | warning
//	owning_domain    owning_domain
//	domain_id        domain_id
//	provider         maas | node_agent | app_runtime | storage_provider | gateway | billing_ingestion
//	status           open (default) | resolved | all
//	age              Go duration (e.g. 90s, 15m, 2h) greater than zero: only findings
//	                 whose first_seen_at is at or before now - age, where now is the
//	                 server's wall clock. first_seen_at is event time, so on a replay
//	                 of old events every finding is "old".
//	tag              a tag of the finding's platform record; unlike the other
//	                 filters, repeated tags must ALL be on the record (tag=gpu&tag=eu,
//	                 or tag=gpu,eu). A tag filter reads drift_evidence, not the
//	                 summary tables, and leaves billing mismatches (no tags) out.
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
// /v1/drift also takes sort = evidence_id (default) | attention_score
// (descending) | first_seen_at (oldest first) | last_seen_at (newest
// first); a cursor belongs to the sort it was issued under.
//
// # Nodes, attention, connectivity
//
// /v1/nodes filters on node_id, owning_domain, domain_id, gate,
// connectivity_mode, node_agent_state, node_agent_reason, health,
// workload_impact, update_path, terminal_stream_probe (enumerations
// checked) and tag (all must match, as on /v1/drift), sorts by node_id (default), attention_score (descending) or
// last_seen_at (longest silent first), and pages with limit and cursor.
// /v1/connectivity takes the same filters but connectivity_mode.
//
// /v1/attention takes n (1..1000, default 20), by = global | domain, kind =
// all | finding | node, the drift filters (findings; status must be open)
// and gate, connectivity_mode, health, node_agent_state (nodes);
// owning_domain, domain_id and tag apply to both. A finding-only filter leaves
// nodes out and a node-only filter leaves findings out. Items rank by
// attention_score descending, findings before nodes on a tie, then id.
// Nodes whose gate is pass are never queued. The scores are the joiner's
// (see the drift model); the queue only orders them.
//
// # Fleet core
//
// The projections of CONTRACT section 8 (docs/fleet-core.md). Each of
// these answers JSON, or its flat rows as an Arrow stream or CSV (Accept
// or format=, audited as every export).
//
// /v1/nodes/{node_id}/timeline lists node_lifecycle_history, newest first:
// limit (default 100, at most 10000). An unknown node has no transitions.
//
// /v1/rollouts sums rollout_status over the joiner partitions per policy
// bundle and domain (nodes, at_target, updating, behind, failed, pending,
// with the bundle's target_version, artifact_id and deadline); filters
// domain_id and policy_bundle_id. rollout_status keeps counts, not nodes,
// so tag is refused here.
//
// /v1/relays counts the current nodes that have sent a heartbeat and are
// not RETIRED per domain_id and relay_id ("" = direct), with the worst
// seconds_behind and the summed backlog; filters owning_domain, domain_id,
// relay_id and tag. Each domain's relays come worst first.
//
// /v1/syncdebt reads sync_debt_minute per (domain_id, relay_id, minute),
// nodes and backlog summed and seconds behind the max over the
// partitions; filters domain_id, relay_id, from and to (RFC 3339, to
// exclusive), last (Go duration: the minutes within it of the newest one
// selected) and limit (points, default 1440; truncated says more exist).
//
// The node page reads the node's recent events (recent_events: Kafka
// coordinates topic/partition/offset, at most MaxObservations) from the
// topics through an EventReader, one Fetch of the exact offset each,
// bounded by a short timeout (-query.eventsTimeout). Each shows fetched
// (envelope fields and a payload summary), expired (past retention or
// compacted away), unavailable (Kafka did not answer, or is not
// configured) or invalid; Kafka never fails the page.
//
// # Billing
//
// /v1/billing/mismatches filters on kind, tenant (tenant_id), product
// (product_id), unit (unit_id), currency, metering_source, usage_id,
// status (open default | resolved | all), age (first_seen_at at or before
// now - age) and day (YYYY-MM-DD, UTC, of first_seen_at; repeatable),
// sorts by mismatch_id (default) or first_seen_at, and pages with limit and
// cursor. Its totals cover the whole selection, per currency and per
// currency and kind; currencies are never added together. Amount at risk
// is |rated - ledger| for amount_mismatch, else the rated amount, else the
// ledger amount; a mismatch with neither is counted as unpriced. Sums are
// exact: ClickHouse adds Decimal128(38, 18) values and the server adds
// those with math/big, never with floats; a sum is printed with as many
// fractional digits as its inputs have.
//
// /v1/billing/rated sums rated_usage (one line per usage_id) grouped by
// group_by (any of tenant, product, unit, day; default all four) and
// always by currency, filtered by tenant, product, unit, currency, day,
// from and to (inclusive days); limit bounds the groups (truncated says
// more exist).
//
// # Exports
//
// /v1/drift, /v1/billing/mismatches and the fleet core's lists stream Apache Arrow IPC (one record
// batch per 8192 rows, written as ClickHouse returns them) when the request
// has Accept: application/vnd.apache.arrow.stream or format=arrow, and CSV
// with Accept: text/csv or format=csv. Exports return the whole selection
// (from cursor, up to limit if given). A failure after the first byte
// leaves the Arrow stream without its end marker and the CSV with a final
// "#error" line, so a reader cannot take a cut export for a whole one.
//
// /v1/bundle selects findings by evidence_id, correlation_id and node_id
// (findings of provider maas), any of them repeatable, together (OR), all
// statuses, at most MaxBundleFindings; format = arrow (an Arrow IPC file,
// default) | parquet. One row per finding with its recommended action and
// its history as a list of structs.
//
// # Read-your-writes
//
// Every endpoint takes wait_watermark (RFC 3339) and wait_timeout (Go
// duration, default 10s, at most Options.MaxWait): the answer waits until
// every partition of the joiner reports a consumer_progress watermark at
// or past wait_watermark, and is 504 with an explanation when the timeout
// passes first. Offsets are not offered: consumer_progress records
// watermarks, not offsets.
//
// A bad or unknown parameter answers 400 with an ErrorBody naming the
// parameter and, for enumerations, the allowed values. An unknown
// evidence_id answers 404. A failed ClickHouse query answers 503.
package api
