package contract

import (
	"slices"
	"testing"
)

func TestTopics(t *testing.T) {
	d := DefaultTopics()
	for _, typ := range AllTypes {
		if d.ForType(typ) == "" || TopicOf(typ) != d.ForType(typ) {
			t.Errorf("event type %s has no default topic", typ)
		}
	}
	if TopicOf("ops.unknown") != "" {
		t.Error("an unknown event type has a topic")
	}
	if TopicOf(TypeCommand) != TopicCommands || !slices.Contains(d.Joined(), TopicCommands) {
		t.Error("operator commands are not routed to the joined commands topic")
	}
	all := d.All()
	if len(all) != 9 || len(slices.Compact(slices.Sorted(slices.Values(all)))) != 9 || all[8] != TopicQuarantine {
		t.Errorf("All() = %v, want nine distinct topics ending with the quarantine", all)
	}
	renamed := d
	renamed.Usage = "usage.v2"
	if renamed.ForType(TypeUsageRecorded) != "usage.v2" || !slices.Contains(renamed.Billing(), "usage.v2") {
		t.Error("a renamed topic is not routed to")
	}
}
