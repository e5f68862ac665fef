package joiner

// Streams of a partition number, in the order that breaks timestamp ties
// in the merge: desired state first, then what providers saw, then what
// node agents reported, then what operators asked.
//
// Each partition orders its three co-partitioned streams with a
// logmerge.Merge, into one order that depends only on the logs' contents:
// the group consumer, a restore and a fresh replay apply the same records
// in the same order, and the classifier, whose event-time watermark and
// windows depend on that order, writes the same findings.
const (
	streamRecords = iota
	streamObservations
	streamTelemetry
	streamCommands
	numStreams
)
