package readmodel

import (
	"reflect"
	"testing"
)

func TestSplitStatements(t *testing.T) {
	f := func(src string, want ...string) {
		t.Helper()
		if got := splitStatements(src); !reflect.DeepEqual(got, want) {
			t.Errorf("splitStatements(%q) = %q, want %q", src, got, want)
		}
	}
	f("")
	f("-- only a comment\n\n")
	f("SELECT 1", "SELECT 1")
	f("-- why\nCREATE TABLE a (x UInt8)\n;\nCREATE TABLE b (y UInt8)\n;\n",
		"-- why\nCREATE TABLE a (x UInt8)", "CREATE TABLE b (y UInt8)")
	f("SELECT 1\r\n ; \r\n-- trailing note\r\n", "SELECT 1")
	// A semicolon inside a line is the statement's own.
	f("SELECT ';'\n;\nSELECT 2", "SELECT ';'", "SELECT 2")
}
