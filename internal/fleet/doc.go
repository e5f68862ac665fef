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
//
// # The fleet core
//
// With Config.Core (on by default) the fleet exercises CONTRACT section 8
// (docs/fleet-core.md):
//
//   - The registry, producer "fleet-registry", a minute before the first
//     record: four fleet.artifact events (art-agent-2026.09..12, none
//     revoked yet) and three fleet.policy_bundle events: pb-stable (every
//     domain, deadline a day before Start), pb-rollout (the first two
//     domains, deadline R_1 + RoundInterval/2) and pb-canary (the third
//     domain, deadline a day after Start). At the start of round 1 (round
//     0 with one round) art-agent-2026.09 is published again, revoked.
//   - Every record gets a tier tag; a node record gets node_kind,
//     lifecycle_intent (ACTIVE written or left out), authority (a master
//     of record; controller_ids: its domain's controllers "-a" and "-b")
//     and, for a node that heartbeats (the retiring one aside), desired:
//     its domain's bundle.
//   - Every heartbeat gets reported_version, artifact_id and
//     artifact_digest of its bundle, controller_id (the domain's "-a"),
//     relay_id (a third of the nodes direct, the others behind one of two
//     relays of the domain), uptime_s and policy_bundle_id.
//   - Scripted nodes (Role: a fixed number each, chosen among drift- and
//     agent-healthy nodes that are not updated) follow one path each:
//     going AUTONOMOUS in round 1 and returning, replaying and LIVE_OK in
//     round 2 (one of them QUARANTINED instead, its artifact's digest
//     wrong on return); the revoked artifact; an unknown artifact; a wrong
//     digest; split brain (the domain's second controller obeyed at
//     R_r+3m every round, or once); an unlisted controller; rollout
//     stragglers (behind with no update, updating past the deadline, a
//     failing update with health DEGRADED, an update completing in round
//     1; canary nodes still updating); lifecycle intents PROVISIONING,
//     PROVISIONING then ENROLLED, ACTIVE then DECOMMISSIONING,
//     DECOMMISSIONING then RETIRED (their version 2 records at the start
//     of round 1). Their extra heartbeats beat at R_r + 1, 2 or 3 minutes
//     (slots), after the round's usage and before its scan markers; they
//     move a partition's watermark to at most R_r+2m50s, before any orphan
//     grace or staleness deadline of the drift model, so every promise
//     above still holds.
//   - Core.BadInput (off by default; make run turns it on) adds a node
//     record with an unknown node_kind, a bundle naming an unknown
//     artifact and a heartbeat naming an unknown bundle (a second older
//     than the node's own, so it would change nothing if applied):
//     Truth.Fleet.Rejections.
//
// Truth.Fleet predicts, by the fleet core's rules, every node's final
// phase, state, authority, supply chain and rollout category, the
// transitions of the scripted nodes, rollout counts per bundle and domain,
// the relays' final sync debt and the registry; Truth.Findings gains the
// authority_conflict and supply_chain_violation findings (their
// retry_count is not predicted). A transition the watermark caused has no
// predicted time: which event moves a partition's watermark past a
// deadline depends on the partitioning; on the default timeline the
// sequence does not. Sparser rounds (RoundInterval above about 6m) put
// silence deadlines between a node's heartbeats, where other nodes'
// events decide them; transitions are then not predicted (final states
// still are). Sync debt's relays: node counts are exact; a relay holding
// a returning node (whose debt falls within the last round) may show its
// earlier debt in the last minute's row (RelayDebt.Moving).
package fleet
