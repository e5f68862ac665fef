package contract

import (
	"bytes"
	"encoding/binary"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of objects and arrays in one event: the
// envelope object is depth 1, its payload depth 2, a payload's tags array
// depth 3. No contract payload comes close; the bound keeps hostile input
// from costing stack or time.
const MaxDepth = 16

// smallObject is the number of keys up to which duplicate keys are found by
// linear comparison; larger objects switch to a set, so an object of many
// keys costs linear time, not quadratic.
const smallObject = 16

// Envelope fields captured by the scanner at depth 1.
const (
	fEventID = iota
	fEventType
	fSchemaVersion
	fProducer
	fSeq
	fOccurredAt
	fCorrelationID
	fEnvironment
	fPayload
	nFields
)

var fieldNames = [nFields]string{"event_id", "event_type", "schema_version", "producer", "seq", "occurred_at", "correlation_id", "environment", "payload"}

func fieldIndex(key []byte) int {
	switch string(key) { // no allocation: the compiler compares in place
	case "event_id":
		return fEventID
	case "event_type":
		return fEventType
	case "schema_version":
		return fSchemaVersion
	case "producer":
		return fProducer
	case "seq":
		return fSeq
	case "occurred_at":
		return fOccurredAt
	case "correlation_id":
		return fCorrelationID
	case "environment":
		return fEnvironment
	case "payload":
		return fPayload
	}
	return -1
}

// span is a JSON value inside the scanned input: b[start:end].
type span struct {
	start, end int
	escaped    bool // a string containing backslash escapes
	set        bool
}

// keyRef is one object key, unescaped: either input[off:off+n] or, for a
// key with escapes, scratch[off:off+n].
type keyRef struct {
	off, n    int
	inScratch bool
}

// scanner checks that input is exactly one JSON object that is
// syntactically valid (RFC 8259), valid UTF-8, nested at most MaxDepth deep
// and free of duplicate keys in any object, and records where the envelope
// fields' values are. It never recurses deeper than MaxDepth and allocates
// only for objects of more than smallObject keys.
type scanner struct {
	b       []byte
	fields  [nFields]span
	keys    []keyRef // keys of the open objects, innermost last
	scratch []byte   // unescaped keys that had escapes
	sets    []keySet // per depth: the key set of a large object, or nil
	err     *ValidationError

	zeroCopy bool // field strings alias b (Validator.ZeroCopy)
}

type keySet map[string]struct{}

var scannerPool = sync.Pool{New: func() any { return &scanner{sets: make([]keySet, MaxDepth+1)} }}

func getScanner(b []byte) *scanner {
	s := scannerPool.Get().(*scanner)
	s.b = b
	s.fields = [nFields]span{}
	s.keys = s.keys[:0]
	s.scratch = s.scratch[:0]
	s.err = nil
	s.zeroCopy = false
	return s
}

func putScanner(s *scanner) {
	s.b = nil
	if cap(s.keys) > 1024 || cap(s.scratch) > 64<<10 {
		s.keys, s.scratch = nil, nil // do not pin what one hostile line grew
	}
	for i := range s.sets {
		s.sets[i] = nil
	}
	scannerPool.Put(s)
}

// Scan checks that b is one well-formed JSON object under the validator's
// structural rules (valid UTF-8, nesting at most MaxDepth, no duplicate
// keys) without decoding it. It is what DecodeEvent runs first; consumers
// may call it on any JSON they take from outside.
func Scan(b []byte) *ValidationError {
	s := getScanner(b)
	defer putScanner(s)
	return s.top()
}

// top scans the whole input as one object surrounded by whitespace.
func (s *scanner) top() *ValidationError {
	i := skipSpace(s.b, 0)
	if i == len(s.b) || s.b[i] != '{' {
		return invalid(ReasonBadJSON, "", "event is not a JSON object")
	}
	i = s.object(i, 1)
	if s.err != nil {
		return s.err
	}
	if i = skipSpace(s.b, i); i != len(s.b) {
		s.syntax(i, "data after the object")
	}
	return s.err
}

func (s *scanner) syntax(i int, what string) int {
	if s.err == nil {
		if i >= len(s.b) {
			s.err = invalid(ReasonBadJSON, "", "unexpected end of JSON input")
		} else {
			s.err = invalid(ReasonBadJSON, "", "invalid JSON at byte %d: %s", i, what)
		}
	}
	return len(s.b)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value scans the value starting at b[i] (no leading space) at the given
// depth and returns the index after it.
func (s *scanner) value(i, depth int) int {
	if i >= len(s.b) {
		return s.syntax(i, "")
	}
	switch c := s.b[i]; {
	case c == '{':
		return s.object(i, depth+1)
	case c == '[':
		return s.array(i, depth+1)
	case c == '"':
		end, _ := s.str(i)
		return end
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number(i)
	case c == 't':
		return s.literal(i, "true")
	case c == 'f':
		return s.literal(i, "false")
	case c == 'n':
		return s.literal(i, "null")
	}
	return s.syntax(i, "expected a value")
}

func (s *scanner) literal(i int, lit string) int {
	if !bytes.HasPrefix(s.b[i:], []byte(lit)) {
		return s.syntax(i, "invalid literal")
	}
	return i + len(lit)
}

func (s *scanner) number(i int) int {
	end, ok := numberEnd(s.b, i)
	if !ok {
		return s.syntax(i, "invalid number")
	}
	return end
}

// numberEnd checks the JSON number (RFC 8259 section 6) at b[i] and
// returns the index after it; both decoders' scanners share it.
func numberEnd(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	default:
		return 0, false
	}
	ok := true
	if i < len(b) && b[i] == '.' {
		if i, ok = digits(b, i+1); !ok {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i, ok = digits(b, i); !ok {
			return 0, false
		}
	}
	return i, true
}

// digits returns the index after the digits at b[i], and false if there
// are none.
func digits(b []byte, i int) (int, bool) {
	d := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i, i > d
}

// str scans the string starting at the quote b[i] and returns the index
// after its closing quote and whether it holds escapes.
func (s *scanner) str(i int) (int, bool) {
	b := s.b
	escaped := false
	i++
	for i < len(b) {
		// Skip eight plain ASCII bytes at a time: none a quote, a
		// backslash, a control character or a non-ASCII byte.
		for i+8 <= len(b) && plain8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, escaped
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return s.syntax(i, "unterminated string"), escaped
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
					return s.syntax(i, "invalid \\u escape"), escaped
				}
				i += 6
			default:
				return s.syntax(i, "invalid escape"), escaped
			}
		case c < 0x20:
			return s.syntax(i, "control character in string"), escaped
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				if s.err == nil {
					s.err = invalid(ReasonBadJSON, "", "invalid UTF-8 at byte %d", i)
				}
				return len(b), escaped
			}
			i += n
		}
	}
	return s.syntax(i, "unterminated string"), escaped
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plain8 reports whether none of the eight bytes in x is '"', '\\', below
// 0x20 or above 0x7f (SWAR: a byte b is zero in x^c when b == c).
func plain8(x uint64) bool {
	hasZero := func(v uint64) uint64 { return (v - lsb) & ^v & msb }
	return (x&msb)|((x-0x20*lsb) & ^x & msb)|hasZero(x^('"'*lsb))|hasZero(x^('\\'*lsb)) == 0
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func (s *scanner) tooDeep(i int) int {
	if s.err == nil {
		s.err = invalid(ReasonTooDeep, "", "nesting deeper than %d levels at byte %d", MaxDepth, i)
	}
	return len(s.b)
}

func (s *scanner) array(i, depth int) int {
	if depth > MaxDepth {
		return s.tooDeep(i)
	}
	i = skipSpace(s.b, i+1)
	if i < len(s.b) && s.b[i] == ']' {
		return i + 1
	}
	for {
		i = s.value(i, depth)
		if s.err != nil {
			return i
		}
		var end bool
		if i, end = s.next(i, ']'); end {
			return i
		}
	}
}

func (s *scanner) object(i, depth int) int {
	if depth > MaxDepth {
		return s.tooDeep(i)
	}
	mark := len(s.keys)
	defer func() {
		s.keys = s.keys[:mark]
		s.sets[depth] = nil
	}()
	i = skipSpace(s.b, i+1)
	if i < len(s.b) && s.b[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(s.b) || s.b[i] != '"' {
			return s.syntax(i, "expected a string key")
		}
		kstart := i
		kend, escaped := s.str(i)
		if s.err != nil {
			return kend
		}
		key := s.addKey(kstart, kend, escaped, mark, depth)
		if s.err != nil {
			return len(s.b)
		}
		i = skipSpace(s.b, kend)
		if i >= len(s.b) || s.b[i] != ':' {
			return s.syntax(i, "expected :")
		}
		i = skipSpace(s.b, i+1)
		vstart, esc := i, false
		if i < len(s.b) && s.b[i] == '"' {
			i, esc = s.str(i)
		} else {
			i = s.value(i, depth)
		}
		if s.err != nil {
			return i
		}
		if depth == 1 {
			if f := fieldIndex(key); f >= 0 {
				s.fields[f] = span{start: vstart, end: i, escaped: esc, set: true}
			}
		}
		var end bool
		if i, end = s.next(i, '}'); end {
			return i
		}
	}
}

// next reads what follows a value inside an array or object closed by
// closing: after a comma it returns the start of the next element and
// false; after the closing byte, the position past it and true; on
// anything else it records the syntax error and returns true.
func (s *scanner) next(i int, closing byte) (int, bool) {
	i = skipSpace(s.b, i)
	if i >= len(s.b) {
		return s.syntax(i, ""), true
	}
	switch s.b[i] {
	case ',':
		return skipSpace(s.b, i+1), false
	case closing:
		return i + 1, true
	}
	return s.syntax(i, "expected , or "+string(closing)), true
}

// addKey records the key b[kstart:kend] (quoted) of the object whose keys
// start at keys[mark], failing on a duplicate. It returns the unescaped key.
func (s *scanner) addKey(kstart, kend int, escaped bool, mark, depth int) []byte {
	var (
		ref keyRef
		key []byte
	)
	if escaped {
		off := len(s.scratch)
		s.scratch = appendUnescaped(s.scratch, s.b[kstart+1:kend-1])
		ref = keyRef{off: off, n: len(s.scratch) - off, inScratch: true}
		key = s.scratch[off:]
	} else {
		ref = keyRef{off: kstart + 1, n: kend - kstart - 2}
		key = s.b[ref.off : ref.off+ref.n]
	}
	open := s.keys[mark:]
	if set := s.sets[depth]; set != nil {
		if _, dup := set[string(key)]; dup {
			return s.duplicate(key, kstart)
		}
		set[string(key)] = struct{}{}
	} else {
		for _, k := range open {
			if bytes.Equal(s.keyBytes(k), key) {
				return s.duplicate(key, kstart)
			}
		}
		if len(open)+1 > smallObject {
			set = make(keySet, 2*smallObject)
			for _, k := range open {
				set[string(s.keyBytes(k))] = struct{}{}
			}
			set[string(key)] = struct{}{}
			s.sets[depth] = set
		}
	}
	s.keys = append(s.keys, ref)
	return key
}

func (s *scanner) keyBytes(k keyRef) []byte {
	if k.inScratch {
		return s.scratch[k.off : k.off+k.n]
	}
	return s.b[k.off : k.off+k.n]
}

func (s *scanner) duplicate(key []byte, at int) []byte {
	if s.err == nil {
		s.err = invalid(ReasonDuplicateKey, "", "key %q appears twice in one object (second at byte %d)", truncate(key, 64), at)
	}
	return nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// appendUnescaped appends the unescaped form of the string body b (between
// the quotes, already scanned) to dst. Invalid surrogates become U+FFFD, as
// encoding/json does.
func appendUnescaped(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		c := b[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		switch b[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := rune(hex4(b[i+2 : i+6]))
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if i+6 <= len(b) && b[i] == '\\' && b[i+1] == 'u' {
					r2 = rune(hex4(b[i+2 : i+6]))
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // " \ /
			dst = append(dst, b[i+1])
		}
		i += 2
	}
	return dst
}

func hex4(b []byte) uint16 {
	var v uint16
	for _, c := range b[:4] {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= uint16(c - '0')
		case c >= 'a' && c <= 'f':
			v |= uint16(c - 'a' + 10)
		default:
			v |= uint16(c - 'A' + 10)
		}
	}
	return v
}
