package reconcile

// Streams of a partition number, in the order that breaks timestamp ties
// in the merge: usage first, then rated lines, then postings (the order in
// which they normally happen).
//
// Each partition orders them with a logmerge.Merge, so that the live
// consumer, a restore and a fresh replay apply the same records in the
// same order: the tracker's watermark, graces and window versions depend
// on that order, so the rows written do not depend on how fetches chunk
// the logs, nor on crashes and restarts.
const (
	streamUsage = iota
	streamRated
	streamLedger
	numStreams
)

// stream returns the stream index of topic t.
func (r *Reconciler) stream(t string) int {
	switch t {
	case r.opts.Topics.Rated:
		return streamRated
	case r.opts.Topics.Ledger:
		return streamLedger
	}
	return streamUsage
}

// streamTopics returns the topic of each stream.
func (r *Reconciler) streamTopics() [numStreams]string {
	return [numStreams]string{r.opts.Topics.Usage, r.opts.Topics.Rated, r.opts.Topics.Ledger}
}
