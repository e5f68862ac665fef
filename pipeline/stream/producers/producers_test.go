package producers

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/stream/snap"
)

func TestCountsChangedAndSnapshot(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	var c Counts
	c.Add("scanner-b", contract.ReasonLate, t0)
	c.Add("scanner-a", contract.ReasonClockSkew, t0.Add(time.Second))
	c.Add("scanner-b", contract.ReasonLate, t0.Add(-time.Minute)) // an earlier timestamp keeps LastAt
	want := []Count{
		{Producer: "scanner-a", Reason: contract.ReasonClockSkew, Events: 1, LastAt: t0.Add(time.Second)},
		{Producer: "scanner-b", Reason: contract.ReasonLate, Events: 2, LastAt: t0},
	}
	if got := c.Changed(nil); !reflect.DeepEqual(got, want) {
		t.Fatalf("Changed = %+v, want %+v", got, want)
	}
	if got := c.Changed(nil); len(got) != 0 {
		t.Fatalf("Changed after Changed = %+v, want none", got)
	}
	c.Add("scanner-a", contract.ReasonClockSkew, t0.Add(2*time.Second))
	if got := c.Changed(nil); len(got) != 1 || got[0].Events != 2 {
		t.Fatalf("Changed after one more = %+v, want scanner-a at 2", got)
	}

	var w snap.Writer
	c.AppendSnapshot(&w)
	var back Counts
	if err := back.LoadSnapshot(snap.NewReader(w.B)); err != nil {
		t.Fatal(err)
	}
	if got := back.Changed(nil); len(got) != 0 {
		t.Fatalf("a restored tally reports %d changed counts; its rows were written before the checkpoint", len(got))
	}
	for _, k := range want {
		if g, w := back.Get(k.Producer, k.Reason), c.Get(k.Producer, k.Reason); g != w {
			t.Fatalf("restored %+v, want %+v", g, w)
		}
	}
	var again snap.Writer
	back.AppendSnapshot(&again)
	if string(again.B) != string(w.B) {
		t.Fatal("a restored tally writes other snapshot bytes")
	}
}

func TestCountsBounded(t *testing.T) {
	var c Counts
	at := time.Unix(0, 0)
	for i := range MaxEntries + 100 {
		c.Add(fmt.Sprintf("p%d", i), contract.ReasonLate, at)
	}
	if c.Len() != MaxEntries+1 {
		t.Fatalf("Len = %d, want %d (the bound and the overflow line)", c.Len(), MaxEntries+1)
	}
	if got := c.Get(Overflow, contract.ReasonLate).Events; got != 100 {
		t.Fatalf("overflow counted %d, want 100", got)
	}
	var total uint64
	for _, n := range c.Changed(nil) {
		total += n.Events
	}
	if total != MaxEntries+100 {
		t.Fatalf("counts sum to %d, want every record (%d)", total, MaxEntries+100)
	}
}

func TestLoadSnapshotRejectsCorrupt(t *testing.T) {
	var c Counts
	c.Add("p", contract.ReasonLate, time.Unix(1, 0))
	var w snap.Writer
	c.AppendSnapshot(&w)
	for cut := range len(w.B) {
		var back Counts
		if err := back.LoadSnapshot(snap.NewReader(w.B[:cut])); err == nil {
			t.Fatalf("a snapshot cut at %d of %d bytes loaded", cut, len(w.B))
		}
	}
}
