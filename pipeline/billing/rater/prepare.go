package rater

import (
	"bytes"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/contract"
)

// A round is processed in two phases. prepare decodes, validates, keys,
// digests, rates and encodes every record, in parallel over the round's
// records: that work depends on the record alone. decide then runs over
// the prepared records in their order, alone: it checks each against the
// key state and produces the rated line or the quarantine record, exactly
// as if the records were processed one by one.

// prepared is one record after prepare.
type prepared struct {
	rec *kgo.Record
	// verr is why the record is not a valid event (nil when it is);
	// notUsage, that it is a valid event of another type (eventType).
	verr      *contract.ValidationError
	notUsage  bool
	eventType string
	eventID   string // copied out of the record's decoder
	e         usageEvent
	// misrouted: the usage key does not hash to the partition the record
	// is in, or the record's key is not the usage key.
	misrouted bool
	occurred  time.Time
	// rating is the usage's rating; value its rated line when rated.
	rating Rating
	value  []byte
}

// preparer is one worker of prepare, with its own decoder and arena.
type preparer struct {
	decoder *contract.Decoder
	arena   []byte // keys, usage_ids, event_ids and rated lines; held until the round's flush
}

// minPerWorker is the fewest records worth a worker of their own.
const minPerWorker = 2000

// prepare fills ps[i] from recs[i], over as many workers as the process
// has cores (and the round has records for). The member's lock is held.
func (r *Rater) prepare(recs []*kgo.Record, ps []prepared, book *pricebook.Book) {
	workers := min(runtime.GOMAXPROCS(0), max(1, len(recs)/minPerWorker))
	for len(r.preparers) < workers {
		r.preparers = append(r.preparers, &preparer{decoder: contract.NewDecoder(contract.Validator{Environment: r.opts.Environment, ZeroCopy: true})})
	}
	span := func(w int) (int, int) { return w * len(recs) / workers, (w + 1) * len(recs) / workers }
	if workers == 1 {
		r.preparers[0].run(r, recs, ps, book)
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		from, to := span(w)
		wg.Add(1)
		go func(p *preparer) {
			defer wg.Done()
			p.run(r, recs[from:to], ps[from:to], book)
		}(r.preparers[w])
	}
	wg.Wait()
}

// run prepares recs into ps. It reads only r's configuration.
func (p *preparer) run(r *Rater, recs []*kgo.Record, ps []prepared, book *pricebook.Book) {
	if need := 512 * len(recs); cap(p.arena)-len(p.arena) < need {
		// The old arena stays with the records carved from it.
		p.arena = make([]byte, 0, max(need, 2*cap(p.arena)))
	}
	for i, rec := range recs {
		ps[i] = prepared{rec: rec}
		p.prepareOne(r, &ps[i], book)
	}
}

func (p *preparer) prepareOne(r *Rater, out *prepared, book *pricebook.Book) {
	rec := out.rec
	// The envelope and payload alias rec.Value and the decoder: what
	// outlives this call is copied into the arena.
	env, payload, digest, verr := p.decoder.DecodeEventPayloadDigest(rec.Value)
	if verr != nil {
		out.verr = verr
		return
	}
	out.eventID = p.copyString(env.EventID)
	u, ok := payload.(*contract.Usage)
	if !ok {
		out.notUsage, out.eventType = true, p.copyString(env.EventType)
		return
	}
	start := len(p.arena)
	p.arena = append(append(append(p.arena, u.MeteringSource...), '/'), u.MeteringID...)
	key := p.arena[start:len(p.arena):len(p.arena)]
	out.e = usageEvent{
		part:    contract.Partition(key, r.partitions),
		key:     key,
		hash:    hashKey(key),
		usageID: p.copyString(u.UsageID),
		digest:  digest,
		at:      env.OccurredAt.UnixNano(),
	}
	p.arena = out.e.setClaim(p.arena, u.MeteringSource, u.MeteringID)
	if !rec.Timestamp.IsZero() {
		out.e.ts = rec.Timestamp.UnixNano()
	}
	out.misrouted = out.e.part != rec.Partition || !bytes.Equal(rec.Key, key)
	out.occurred = env.OccurredAt
	out.rating = Rate(book, r.currencies, u)
	if out.rating.Reason != "" {
		return
	}
	start = len(p.arena)
	p.arena = appendRated(p.arena, &env, u, &out.rating, r.opts.Environment, r.ratedAt)
	out.value = p.arena[start:len(p.arena):len(p.arena)]
}

// copyString copies s into the arena and returns the copy.
func (p *preparer) copyString(s string) string {
	if s == "" {
		return ""
	}
	start := len(p.arena)
	p.arena = append(p.arena, s...)
	b := p.arena[start:len(p.arena):len(p.arena)]
	return unsafeString(b)
}

// unsafeString returns b as a string without copying; b is never written
// again while the string is in use (the arena only grows within a round).
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
