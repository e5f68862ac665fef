// Package nodeagent tracks node-agent evidence for one joiner partition:
// the node records of provider maas (desired agent version, certificate
// issuer and ingress-trust fingerprints) and the nodeagent.heartbeat
// telemetry of each node, from which it derives the node-agent state,
// reason and release gate of seed 000, the connectivity mode of seed 004,
// the identity signals the joiner turns into identity_mismatch findings,
// and the node's attention score.
//
// The rules are those of docs/node-agent-model.md. The tracker works in
// event time only: it never reads the wall clock, silence is measured
// against the watermark the joiner passes to Advance, and a replay of the
// same events yields the same Status sequence. A Tracker belongs to one
// partition worker and is not safe for concurrent use.
package nodeagent
