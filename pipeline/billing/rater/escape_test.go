package rater

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// escapeByByte is appendStringBody without the eight-byte skip: the
// reference it must agree with.
func escapeByByte(dst []byte, s string) []byte { return appendEscaped(dst, s, false) }

func checkEscape(t *testing.T, s string) {
	t.Helper()
	got, want := string(appendStringBody(nil, s)), string(escapeByByte(nil, s))
	if got != want {
		t.Fatalf("appendStringBody(%q) = %s, want %s", s, got, want)
	}
	var back string
	if err := json.Unmarshal([]byte(`"`+got+`"`), &back); err != nil {
		t.Fatalf("appendStringBody(%q) = %s, not a JSON string body: %v", s, got, err)
	}
	if utf8.ValidString(s) && back != s {
		t.Fatalf("appendStringBody(%q) decodes to %q", s, back)
	}
}

func TestAppendStringBody(t *testing.T) {
	special := []string{"\"", "\\", "\n", "\x00", "\x1f", "\x7f", "é", "\u2028", "\u2029", "\xff", "\xe2\x80"}
	for _, sp := range special {
		// The special byte at every place of a string longer than two
		// eight-byte words, so that every lane of the skip sees it.
		for i := 0; i <= 20; i++ {
			checkEscape(t, strings.Repeat("a", i)+sp+strings.Repeat("b", 20-i))
		}
	}
	for _, s := range []string{"", "a", "gpu-meter-eu1/m-00000001", "usage-0123456789abcdef", " !#$%&'()*+,-./0123456789:;<=>?@[]^_`{|}~"} {
		checkEscape(t, s)
	}
	// Every byte value in every lane.
	for c := 0; c < 256; c++ {
		for i := 0; i < 8; i++ {
			b := []byte("abcdefghijklmnop")
			b[i] = byte(c)
			checkEscape(t, string(b))
		}
	}
}

func FuzzAppendStringBody(f *testing.F) {
	for _, s := range []string{"", "plain-ascii-usage-id", "quote\"in the middle", "tab\tand\u2028", "bad\xffutf8 here"} {
		f.Add(s)
	}
	f.Fuzz(checkEscape)
}
