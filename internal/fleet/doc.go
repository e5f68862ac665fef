// Package fleet generates a synthetic fleet: a deterministic, streamable
// sequence of contract events (platform records, provider observations,
// scan markers, node-agent heartbeats and usage) together with the exact
// drift findings, node-agent states and usage totals that a correct
// pipeline derives from it. `make run` feeds it through the ingest gateway,
// the end-to-end test compares the joiner's findings with Truth, and
// benchmarks stream millions of events from it.
//
// # Population
//
// Config.Domains domains ("eu-west", "us-east", ...) each hold GPU nodes
// (gpuaas_allocation, provider maas), app instances (app_runtime), storage
// volumes (storage, storage_provider) and model endpoints (model_serving,
// gateway). A resource's provider_id is "<gpu|app|vol|ep>-<domain>-<nnnnn>",
// its record_id "rec-" + provider_id. Each resource gets exactly one drift
// Kind, each drift-healthy node at most one NodeKind; the number of each
// kind is its rate times the family's population, rounded, and which
// resources get it is drawn from the seed.
//
// # Timeline
//
// Times are event times; Start defaults to a fixed instant, so a seed
// always gives the same bytes.
//
//   - Records phase: every record at Start-RecordLead (+ up to a quarter of
//     it), version 1; version-2 updates at Start-RecordLead/2 (healthy
//     resources drawn by UpdateRate, and orphan_deleted, whose version 2 is
//     deleted:true).
//   - Round r starts at R_r = Start + r*RoundInterval and is emitted in
//     this order: in round 1 (round 0 if Rounds is 1), late replays of
//     version 1 of some updated records, with their original occurred_at:
//     a lower version, so they change nothing; node-agent heartbeats
//     (keyed maas/<node_id>) at R_r + [0, ObservationSpread); every
//     provider's observations at R_r + [0, ObservationSpread); usage; then
//     one provider.scan_completed per provider with scan_started_at R_r at
//     R_r + ScanDuration (+100 ms per provider), after all of the round's
//     observations in both time and emission order.
//   - Redeliveries (DuplicateRate) are exact byte copies of an event,
//     emitted later in the same phase or round.
//
// Producers: "platform-records-<domain>", "<maas|appruntime|storage|
// gateway>-scanner-<domain>" for observations, "<...>-scanner-coordinator"
// for a provider's scan marker (a scan covers all domains, since the
// marker names only the provider), "nodeagent-<node_id>" (and
// "nodeagent-<node_id>-h2" for a cloned host), and "<gpu-meter|app-meter|
// storage-meter|gateway-usage>-<domain>" for usage, which is also the
// metering_source. Every producer's seq increases; event ids are ULIDs
// derived from the seed and a counter. An observation's and a scan
// marker's correlation_id is "scan-<provider>-<r>".
//
// # Why the ground truth is exact
//
// With the default windows (staleness 10m, orphan grace 5m, allowed
// lateness 30s; docs/drift-model.md):
//
//   - Healthy resources never cross a deadline: an identity is observed in
//     [R_r, R_r+20s) and next in round r+1, while the watermark before that
//     is at most R_r + ScanDuration - 30s or R_(r+1) + 20s - 30s, both well
//     under R_r + 10m; and every observation is at or after the scan start
//     R_r, so no scan marker finds it missing. The final watermark is the
//     last round's markers minus 30s.
//   - Every round-0 observation is emitted before any scan marker, and the
//     first round-0 marker (R_0 + 5m50s, watermark R_0 + 5m20s) lands on
//     every partition after every orphan's grace (first observation + 5m)
//     has passed. So every orphan opens at that marker, never at one of its
//     own observations, and each later observation confirms it:
//     retry_count = Rounds-1, however the events are partitioned.
//   - stale, quota, route and identity findings open at once on the
//     round-0 observation; each later round's observation confirms them:
//     retry_count = Rounds-1. A stale finding's posture is operator_review
//     after Windows.ReviewAfter (3) disagreeing observations, else retry.
//     stale_resolved disagrees in round 0 only: resolved, retry_count 0.
//   - A missing resource's record precedes round 0, so round 0's scan
//     marker opens the finding; no observation ever confirms it:
//     retry_count 0.
//   - Redeliveries repeat (producer, seq) and so confirm nothing.
//
// Config.Validate refuses timelines that would break these promises.
//
// Node-agent kinds and usage anomalies are reported in Truth.Nodes and
// Truth.Usage; the drift model does not yet turn them into findings, so
// they are not in Truth.Findings.
package fleet
