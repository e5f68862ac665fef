// Package contract is the wire contract every Driftline component shares
// (CONTRACT sections 1-6), spelled once: the topics and how they group
// (Topics), the Kafka key of each event, the envelope and the payload of
// each event type, the vocabulary of findings and node-agent evidence
// (classifications with their severity, posture and runbook, statuses,
// gates, states, connectivity modes, billing kinds), the quarantine record
// (Quarantined) with its reasons and headers, and the one validator that
// the ingest gateway and the Kafka consumers both apply. What a decimal
// string is lives in package decimal beside it.
//
// The validator is strict and fail-closed: every rejection carries a stable
// Reason code that ends up in ingest receipts, in ingest.quarantine and in
// metrics. Money and quantities stay decimal strings, and a string is a
// decimal exactly when package decimal can compute with it (IsDecimal); no
// float ever touches them here.
//
// Before any field is read, a line passes a single structural scan (Scan):
// at most MaxEventLen bytes (oversized_event, checked before anything else),
// exactly one JSON object with nothing after it, valid UTF-8 (bad_json),
// objects and arrays nested at most MaxDepth deep (nesting_too_deep), and no
// object naming a key twice, compared after unescaping, at any depth
// (duplicate_key: a duplicate is how two readers of one line come to
// disagree about it). Keys match struct fields exactly, never
// case-insensitively. The scan is iterative per level, bounded by
// MaxDepth, and allocates nothing for ordinary events, so hostile input
// costs at most linear time and the line's own memory.
//
// DecodeEvent reads a line in a single pass specialised for the envelope
// and each payload type (fast.go) and leaves what that pass does not
// handle itself (every rejection, and rare encodings) to the reference
// decoder: Scan, then the payload decoded into its struct by
// segmentio/encoding. Both return the same envelope, payload and error
// for every line. Validator.DecodeEvent returns a new payload per call; a
// Decoder reuses one struct per event type, valid until its next call,
// and with ZeroCopy decodes the common events without allocating.
//
// The decoders are fuzzed (FuzzScan, FuzzDecode, and FuzzDecodeFast, which
// holds the single-pass decoder to the reference); `go test` runs their
// seed corpora, and a longer run is
//
//	go test -run '^$' -fuzz FuzzScan -fuzztime 2m ./pipeline/contract/
//	go test -run '^$' -fuzz FuzzDecode -fuzztime 2m ./pipeline/contract/
//	go test -run '^$' -fuzz FuzzDecodeFast -fuzztime 2m ./pipeline/contract/
package contract
