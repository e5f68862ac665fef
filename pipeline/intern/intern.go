// Package intern maps strings that repeat (states, versions, domains,
// fingerprints, correlation ids) to small integer symbols, so that state
// kept per identity holds 4-byte symbols instead of 16-byte string headers
// with their own copies.
//
// A Table only grows; its owner bounds it by rebuilding it from the live
// state once it has doubled (see ownerstate and nodeagent), so a producer
// that sends a new value with every event costs at most twice the distinct
// values currently held. A Table is not safe for concurrent use.
package intern

import "strings"

// Sym is an interned string of one Table.
type Sym uint32

// Table interns strings.
type Table struct {
	ids  map[string]Sym
	strs []string
}

// New returns a Table holding fixed as symbols 0, 1, ... in order
// (repeats keep their first symbol).
func New(fixed ...string) *Table {
	t := &Table{ids: make(map[string]Sym, 2*len(fixed)), strs: make([]string, 0, 2*len(fixed))}
	for _, s := range fixed {
		t.Intern(s)
	}
	return t
}

// Intern returns the symbol of s, adding a copy of s when it is new (the
// caller's string may alias a decode buffer). It does not allocate for a
// string already interned.
func (t *Table) Intern(s string) Sym {
	if id, ok := t.ids[s]; ok {
		return id
	}
	s = strings.Clone(s)
	id := Sym(len(t.strs))
	t.strs = append(t.strs, s)
	t.ids[s] = id
	return id
}

// Str returns the string of id.
func (t *Table) Str(id Sym) string { return t.strs[id] }

// Len returns the number of symbols.
func (t *Table) Len() int { return len(t.strs) }
