package reader

import (
	"reflect"
	"testing"

	"github.com/driftline/driftline/pipeline/readmodel/sink"
)

// TestRankedNodeFilter: attention_top_nodes answers the node queue with no
// filter or an owning_domain one, for n within its slots, and with no
// other filter, whichever field of NodeFilter it is.
func TestRankedNodeFilter(t *testing.T) {
	if !rankedNodeFilter(NodeFilter{}, sink.AttentionSlots) || !rankedNodeFilter(NodeFilter{OwningDomains: []string{"d"}}, 20) {
		t.Fatal("no filter, or owning_domain alone, not answered by the slots")
	}
	if rankedNodeFilter(NodeFilter{}, sink.AttentionSlots+1) {
		t.Fatal("n beyond the slots answered by them")
	}
	typ := reflect.TypeFor[NodeFilter]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type != reflect.TypeFor[[]string]() {
			t.Fatalf("NodeFilter.%s is a %s: the test sets each field to a list of one value", f.Name, f.Type)
		}
		if f.Name == "OwningDomains" {
			continue
		}
		var nf NodeFilter
		reflect.ValueOf(&nf).Elem().Field(i).Set(reflect.ValueOf([]string{"x"}))
		if rankedNodeFilter(nf, 10) {
			t.Errorf("a filter on %s answered by the slots", f.Name)
		}
	}
}
