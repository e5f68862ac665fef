package checkpoint

import (
	"fmt"
	"sort"
	"strings"
)

// Cut is where a checkpoint's state stands in each stream it was built
// from: for each topic, the offset of the first record the state does not
// include (the committed offset of that topic's partition). A topic at 0
// contributed nothing. Cut is not tied to a number of streams.
type Cut map[string]int64

// NotAfter reports whether c lies at or before limit in every stream:
// both name the same topics and no offset of c exceeds limit's. Cuts over
// different topics are never comparable, so a checkpoint taken over
// another set of streams is never used.
func (c Cut) NotAfter(limit Cut) bool {
	if len(c) != len(limit) {
		return false
	}
	for t, o := range c {
		l, ok := limit[t]
		if !ok || o > l {
			return false
		}
	}
	return true
}

// Clone returns a copy of c.
func (c Cut) Clone() Cut {
	out := make(Cut, len(c))
	for t, o := range c {
		out[t] = o
	}
	return out
}

// String renders c as topic=offset pairs in topic order.
func (c Cut) String() string {
	ts := make([]string, 0, len(c))
	for t := range c {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	var b strings.Builder
	b.WriteByte('{')
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", t, c[t])
	}
	b.WriteByte('}')
	return b.String()
}

func (c Cut) validate() error {
	if len(c) == 0 {
		return fmt.Errorf("empty cut")
	}
	for t, o := range c {
		if t == "" || o < 0 {
			return fmt.Errorf("bad cut entry %q=%d", t, o)
		}
	}
	return nil
}
