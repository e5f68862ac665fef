// Package checkpoint stores snapshots of a consumer's per-partition state
// in a Kafka topic, so that a new owner of a partition restores the state
// from the newest snapshot and replays only the records after it, instead
// of the streams' whole history. The state is an opaque blob; the package
// does not know its format.
//
// A checkpoint of partition p of consumer group g is the blob together
// with its cut: for each input topic, the offset of the first record the
// state does not include (the committed offset when it was taken).
//
//	store, err := checkpoint.New(ctx, checkpoint.Options{
//		Brokers: brokers, Partitions: 12, Create: true, Registerer: reg,
//	})
//	// after a flush wrote its output and committed offsets:
//	err = store.Save(ctx, group, p, checkpoint.Cut{records: r, observations: o, telemetry: t}, blob)
//	// on assignment, with the group's committed offsets:
//	cp, ok, err := store.Load(ctx, group, p, committed)
//	// ok: decode cp.Blob, replay each topic from cp.Cut[topic] to committed[topic]
//	// !ok: replay from the start
//
// # Guarantees
//
// A checkpoint exists once its manifest exists. Save writes the blob as
// chunks (Options.ChunkBytes each, below the broker's max.message.bytes)
// to partition p of the topic, waits for every one to be acknowledged
// (acks=all, idempotent producer), and only then writes the manifest: the
// checkpoint's id, group, partition, cut, length, xxhash64 of the blob and
// the offsets of its chunks. A writer that dies or fails before the
// manifest leaves chunks no manifest names, which readers never use. Load
// checks every chunk's id, index and length and the blob's hash against
// the manifest; a checkpoint that fails (chunks expired, compacted, or
// overwritten by a racing writer) is skipped and counted, and an older
// one is tried. Load returns the newest whole checkpoint whose cut is at
// or before the offsets it is given in every topic (Cut.NotAfter), so a
// checkpoint saved beyond the committed offsets is never used. A reader
// that cannot use a whole checkpoint (a blob of a format it does not
// know) passes its check to LoadUsable, which then tries an older one.
//
// # Cost of a load
//
// Load reads partition p backwards from its end. It fetches the last
// record alone; when that is a manifest whose chunks lie right before it,
// it jumps over them without reading them, and so on. Elsewhere (records
// of other groups, tombstones, chunks of torn writes) it reads small
// windows that grow while their records are small. A load therefore costs
// the size of the checkpoint it returns plus a record or two per newer
// checkpoint it passes, whatever the number of checkpoints ever written;
// driftline_checkpoint_fetched_records_total and _bytes_total show it.
// Nothing relies on the broker compacting the topic.
//
// # The topic and its retention
//
// The topic (default DefaultTopic) has as many partitions as the
// checkpointed streams: checkpoints of partition p go to partition p, so
// loading one partition never reads another's. With Options.Create a
// missing topic is created with cleanup.policy=compact,delete and
// retention.ms of DefaultRetention (Options.TopicConfig overrides them).
//
// Keys are "<group>/<partition>/<slot>/<chunk index>" for chunks and
// "<group>/<partition>/<slot>/m" for manifests. A partition's checkpoints
// alternate between two slots, a and b, so compaction keeps at most the
// two newest checkpoints of each (group, partition) and a new one (even a
// torn one) never overwrites the keys of the newest whole one. When a
// checkpoint has fewer chunks than the one its slot held before, Save
// writes tombstones for the extra chunk keys. Compaction alone bounds the
// topic to about two checkpoints per partition; time retention removes
// what compaction cannot (chunks of torn writes, groups no longer in use).
//
// Choose retention.ms well above the longest time a partition can go
// without a new checkpoint (a few checkpoint intervals at least, and
// longer than the longest idle period of a partition, or have the owner
// save idle partitions periodically): when the newest checkpoint of a
// partition has expired, Load finds none and the owner replays from the
// start, which is correct but slow. On a broker that does not compact
// (time retention only), size the topic for retention.ms worth of
// checkpoints.
//
// Save calls for one (group, partition) must not overlap. Two owners of a
// partition saving at once (a revoked owner still finishing) is safe: on
// a compacted topic their chunks may mix under one slot, and the hash
// check then rejects the damaged checkpoint.
//
// Benchmarks (Save and Load of a 100 MB blob): see bench/checkpoint.
package checkpoint
