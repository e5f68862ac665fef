package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// progress is a consumer group's committed position over some topics.
type progress struct {
	Committed int64 // records below the committed offsets, summed
	End       int64 // records in the topics (end offsets), summed
	Complete  bool  // every partition with records has a committed offset
}

// pollEvery is how often watch reads a group's progress. A phase ends at
// the first read that finds the group caught up, so the time measured is
// late by up to this much (a 10M phase takes 12-16 s); a read costs the
// broker two small requests.
const pollEvery = 50 * time.Millisecond

func (p progress) caughtUp() bool { return p.Complete && p.Committed >= p.End }

// groupProgress reads the group's committed offsets and the end offsets of
// the topics (consumer lag, as an operator would watch it).
func groupProgress(ctx context.Context, adm *kadm.Client, group string, topicNames []string) (progress, error) {
	var p progress
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topicNames...)
	if err != nil {
		return p, err
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return p, err
	}
	p.Complete = true
	ends.Each(func(o kadm.ListedOffset) {
		p.End += o.Offset
		c, ok := committed.Lookup(o.Topic, o.Partition)
		if !ok || c.Err != nil || c.At < 0 {
			if o.Offset > 0 {
				p.Complete = false
			}
			return
		}
		p.Committed += c.At
	})
	return p, nil
}

// sample is one point of a group's progress over time.
type sample struct {
	T         float64 `json:"t"` // seconds since the phase started
	Committed int64   `json:"committed"`
}

// watch polls the group's progress until it has caught up, every child
// stopped, or timeout passes. It returns the last progress, when the group
// caught up (zero if it did not), and the samples.
func watch(ctx context.Context, adm *kadm.Client, group string, topicNames []string, start time.Time, timeout time.Duration, alive func() error, logf func(string, ...any)) (progress, time.Time, []sample, error) {
	deadline := start.Add(timeout)
	var last progress
	var samples []sample
	lastLog := time.Now()
	for {
		p, err := groupProgress(ctx, adm, group, topicNames)
		now := time.Now()
		if err == nil {
			last = p
			samples = append(samples, sample{T: now.Sub(start).Seconds(), Committed: p.Committed})
			if p.caughtUp() {
				return p, now, samples, nil
			}
		}
		if aerr := alive(); aerr != nil {
			return last, time.Time{}, samples, aerr
		}
		if now.After(deadline) {
			return last, time.Time{}, samples, nil
		}
		if ctx.Err() != nil {
			return last, time.Time{}, samples, ctx.Err()
		}
		if time.Since(lastLog) >= 10*time.Second {
			lastLog = time.Now()
			logf("  %s: %d of %d records committed (%.0f%%)", group, last.Committed, last.End, 100*float64(last.Committed)/float64(max(last.End, 1)))
		}
		select {
		case <-ctx.Done():
		case <-time.After(pollEvery):
		}
	}
}

func describeLag(p progress) string {
	return fmt.Sprintf("%d of %d records committed", p.Committed, p.End)
}
