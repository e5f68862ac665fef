// Package ingest is the HTTP ingest gateway: the one door through which
// producers outside Kafka hand events to the pipeline (CONTRACT section 2).
// It also holds the Quarantiner, which Kafka consumers use to send records
// that bypassed the gateway and failed the same validator to
// ingest.quarantine in the gateway's value shape.
//
// A request is an NDJSON body of envelopes authenticated by an API key, or
// in mTLS mode (dev, and always in prod) by the caller's verified client
// certificate, mapped to an actor by the keys file (see keys.KeyFile). The keys
// file is reloaded on change or SIGHUP (Gateway.WatchKeys); every change
// starts a new policy_rev, audited as policy_rev_changed, and each request
// runs under the one revision it was admitted with. Refused callers
// (unknown, revoked) are counted and written to the audit log
// (event=auth_refused, with the revoked actor).
// Every line is validated with the shared contract.Validator and authorised
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
//   - Memory is bounded: MaxInflight requests and MaxInflightBytes of body at
//     once, MaxLines per request; beyond them the answer is 503 busy (or 413)
//     with Retry-After, never a queue.
//   - On shutdown (Serve, SIGTERM in cmd/ingest) new requests are refused,
//     admitted ones are finished, written and answered, and the producer is
//     flushed before it closes; a request cut off by the shutdown deadline
//     is never answered 200.
//   - A 503 response reports nothing accepted; the caller retries the whole
//     request. Lines that did reach the broker before the failure answer
//     "duplicate" on retry (see below), and consumers dedupe exactly anyway.
//   - Records of one request that land in the same partition keep the
//     request's line order.
//   - provider.scan_completed is written to every partition of its topic so
//     each partition's consumer sees the end of the scan.
//   - Records are partitioned with Kafka's murmur2 (contract.Partition), so
//     co-partitioned topics join on the right partition.
//
// Duplicate suppression here is a convenience for retried requests: a
// bounded, in-memory FIFO set of recently accepted dedupe identities per
// gateway process. It is exact (identities are compared as full strings,
// never as hashes) but forgetful, per process, and checked before the write:
// two concurrent requests carrying the same event may both write it.
// Downstream consumers dedupe exactly; this only spares them the common
// retried request. Each remembered identity keeps the content digest of
// the event accepted under it (contract.EventDigest): a line that repeats
// the identity with the same digest is a duplicate, one with another
// digest (a producer reusing an event_id or a seq) is rejected with
// reason conflicting_duplicate, its receipt naming both digests
// (first_digest, digest), and quarantined like every rejected line.
// Within one request a line that repeats the identity of an earlier line
// is judged once that line's outcome is final, against the digest the
// identity is held with: the earlier line's own when it was accepted or a
// duplicate, the one it conflicted with when it was rejected as a
// conflict. So a copy of a conflicting line is rejected the same way,
// never answered duplicate of an event that was not accepted. A line
// rejected for another reason holds no identity.
package ingest
