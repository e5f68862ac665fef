// Package ingest is the HTTP ingest gateway: the one door through which
// producers outside Kafka hand events to the pipeline (CONTRACT section 2).
//
// A request is an NDJSON body of envelopes authenticated by an API key.
// Every line is validated with the shared event.Validator and authorised
// against the key's allowlist; valid events are produced to their topic with
// the contract's key and the original line as value, rejected lines go to
// ingest.quarantine with their reason code. Sender identity (actor_id,
// source_type) and the policy revision are stamped as record headers from
// the authenticated key, never read from the payload.
//
// Guarantees:
//   - A 200 response means every record it reports (accepted events and
//     quarantined lines) has been acknowledged by the broker with acks=all
//     through an idempotent producer.
//   - A 503 response reports nothing accepted; the caller retries the whole
//     request. Lines that did reach the broker before the failure answer
//     "duplicate" on retry (see below), and consumers dedupe exactly anyway.
//   - Records of one request that land in the same partition keep the
//     request's line order.
//   - provider.scan_completed is written to every partition of its topic so
//     each partition's consumer sees the end of the scan.
//   - Records are partitioned with Kafka's murmur2 (event.Partition), so
//     co-partitioned topics join on the right partition.
//
// Duplicate suppression here is a convenience for retried requests: a
// bounded, in-memory FIFO set of recently accepted dedupe identities per
// gateway process. It is exact (identities are compared as full strings,
// never as hashes) but forgetful, per process, and checked before the write:
// two concurrent requests carrying the same event may both write it.
// Downstream consumers dedupe exactly; this only spares them the common
// retried request.
package ingest
