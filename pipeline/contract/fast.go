package contract

import (
	"encoding/binary"
	"math/bits"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/segmentio/encoding/iso8601"
)

// The fast path.
//
// DecodeEvent first tries a single-pass decoder specialised for the
// envelope and each payload type: it reads the line once, comparing each
// key in place with the one the Go producers write next (in struct order),
// or a later one when they left fields out, before looking it up, checking
// strings eight bytes at a time, parsing numbers and times in place and
// decoding straight into the payload struct through a table of its fields
// (built from the struct tags the reference decoder matches), with the
// structural rules of Scan checked on the way (a payload that comes before
// the event type is delimited first and decoded after the envelope). It
// accepts a line only when it has checked everything the reference decoder
// (Scan, then the envelope rules, then encoding into the payload struct,
// then the payload rules) would, and it then returns exactly what the
// reference returns. Anything it does not handle itself sends the line to
// the reference decoder, which decides:
//
//   - every rejection (the reference produces the reason, field and
//     detail, so they cannot drift apart);
//   - object keys with escapes (duplicates are compared after unescaping);
//   - unknown fields whose value is an object or array, and more than
//     maxUnknown unknown fields in one object;
//   - null as the value of a payload field (the tags array excepted) or
//     of a required envelope field, and integer fields holding anything
//     but a plain non-negative integer of at most 18 digits;
//   - escaped times, and \u escapes of UTF-16 surrogates in payload
//     strings.
//
// For Decoder.DecodeEventDigest it also computes the payload's content
// digest (PayloadDigest) on the way, from what it decodes: a known key's
// hash comes with its field, a string's from its decoded text, a number's
// from the span just parsed.
//
// The differential fuzz target FuzzDecodeFast holds the two to the same
// result on every input, and the digest to EventDigest's.

// maxUnknown is the number of unknown keys per object the fast path checks
// for duplicates; an object with more goes to the reference decoder.
const maxUnknown = 8

// fastScan is the state of one fast decode.
type fastScan struct {
	b        []byte
	zeroCopy bool     // strings alias b (Validator.ZeroCopy)
	dec      *Decoder // payload structs to reuse; nil allocates them
	// digest asks object for the payload's content digest, computed from
	// what it decodes (the hashes of PayloadDigest, without a second pass
	// over the bytes).
	digest bool
}

// fastPayload is a payload struct the fast path decodes into.
type fastPayload interface {
	validate() *ValidationError
}

// unknownKeys are the unknown keys of one object, compared for duplicates.
type unknownKeys struct {
	n    int
	keys [maxUnknown][2]int32 // offset and length in the line
}

// add records the key b[off:off+n] (without escapes); false on a
// duplicate or when the object has too many unknown keys.
func (u *unknownKeys) add(b []byte, off, n int) bool {
	if u.n == maxUnknown {
		return false
	}
	key := b[off : off+n]
	for _, k := range u.keys[:u.n] {
		if string(b[k[0]:k[0]+k[1]]) == string(key) {
			return false
		}
	}
	u.keys[u.n] = [2]int32{int32(off), int32(n)}
	u.n++
	return true
}

// Required envelope fields, as bits of the seen mask.
const envRequired = 1<<fEventID | 1<<fEventType | 1<<fSchemaVersion | 1<<fProducer | 1<<fOccurredAt | 1<<fEnvironment | 1<<fPayload

// fastDecode is DecodeEvent's fast path; ok is false when line is left to
// the reference decoder. With digest, pd is PayloadDigest(env.Payload).
func (v Validator) fastDecode(line []byte, dec *Decoder, digest bool) (env Envelope, payload fastPayload, pd Digest, ok bool) {
	if len(line) > MaxEventLen {
		return env, nil, 0, false
	}
	d := &fastScan{b: line, zeroCopy: v.ZeroCopy, dec: dec, digest: digest}
	var ph uint64 // the payload's hash (digest)
	b := line
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return env, nil, 0, false
	}
	var (
		seen       uint32
		unk        unknownKeys
		occurredAt []byte
		pStart     = -1 // a payload seen before event_type: decoded after the loop
		pEnd       int
		next       int // the field expected next
	)
	i = skipSpace(b, i+1)
	for {
		f := -1
		for j := next; j < nFields; j++ { // a field left out skips ahead
			if q := &envQuoted[j]; q.at(b, i) {
				f, i = j, i+q.n
				break
			}
		}
		var koff, kend int
		if f < 0 {
			if koff, kend, ok = d.key(i); !ok {
				return env, nil, 0, false
			}
			f = fieldIndex(b[koff : kend-1])
			if i, ok = d.colon(kend); !ok {
				return env, nil, 0, false
			}
		}
		if i = skipSpace(b, i); i >= len(b) {
			return env, nil, 0, false
		}
		if f >= 0 {
			if seen&(1<<f) != 0 {
				return env, nil, 0, false
			}
			seen |= 1 << f
			next = f + 1
		}
		var end int
		switch f {
		case fEventID:
			env.EventID, end, ok = d.stringValue(i, true)
			ok = ok && env.EventID != "" && len(env.EventID) <= MaxIDLen
		case fEventType:
			var body []byte
			if body, end, ok = d.plainString(i); ok {
				env.EventType = knownType(view(body))
				ok = env.EventType != ""
			}
		case fSchemaVersion:
			end, ok = d.number(i)
			ok = ok && end == i+1 && b[i] == '1'
			env.SchemaVersion = SchemaVersion
		case fProducer:
			env.Producer, end, ok = d.stringValue(i, true)
			ok = ok && env.Producer != "" && len(env.Producer) <= MaxIDLen
		case fSeq:
			if b[i] == 'n' {
				end, ok = d.literal(i, "null")
				break
			}
			if end, ok = d.number(i); ok {
				env.Seq, ok = parseUint(b[i:end])
				env.HasSeq = true
			}
		case fOccurredAt:
			occurredAt, end, ok = d.plainString(i)
		case fCorrelationID:
			if b[i] == 'n' {
				end, ok = d.literal(i, "null")
				break
			}
			env.CorrelationID, end, ok = d.stringValue(i, true)
		case fEnvironment:
			var body []byte
			if body, end, ok = d.plainString(i); ok {
				env.Environment = knownEnvironment(view(body))
				ok = env.Environment != "" && (v.Environment == "" || env.Environment == v.Environment)
			}
		case fPayload:
			if b[i] != '{' {
				return env, nil, 0, false
			}
			if seen&(1<<fEventType) != 0 {
				var base unsafe.Pointer
				var fields []payloadField
				payload, base, fields = d.target(env.EventType)
				end, ph, ok = d.object(i, base, fields)
			} else {
				pStart = i
				end, ok = skipObject(b, i)
				pEnd = end
			}
			if ok {
				env.Payload = b[i:end]
			}
		default:
			if !unk.add(b, koff, kend-1-koff) {
				return env, nil, 0, false
			}
			end, ok = d.scalar(i)
		}
		if !ok {
			return env, nil, 0, false
		}
		if end+1 < len(b) && b[end] == ',' && b[end+1] == '"' { // compact JSON
			i = end + 1
			continue
		}
		i = skipSpace(b, end)
		if i >= len(b) {
			return env, nil, 0, false
		}
		if b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if b[i] != '}' || skipSpace(b, i+1) != len(b) {
			return env, nil, 0, false
		}
		break
	}
	if seen&envRequired != envRequired || len(occurredAt) == 0 {
		return env, nil, 0, false
	}
	if pStart >= 0 {
		var base unsafe.Pointer
		var fields []payloadField
		payload, base, fields = d.target(env.EventType)
		var end int
		if end, ph, ok = d.object(pStart, base, fields); !ok || end != pEnd {
			return env, nil, 0, false
		}
	}
	// iso8601.Parse is time.Parse(time.RFC3339Nano, ...) with a faster
	// path for the UTC form: when it accepts a time, time.Parse returns
	// the same (TestISO8601IsTimeParse); when it does not, the reference
	// decides.
	t, err := iso8601.Parse(unsafe.String(&occurredAt[0], len(occurredAt)))
	if err != nil || !TimeInRange(t) {
		return env, nil, 0, false
	}
	env.OccurredAt = t
	if payload.validate() != nil {
		return env, nil, 0, false
	}
	return env, payload, Digest(avalanche(ph)), true
}

// view is b as a string without a copy, for lookups that do not keep it.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// target returns the zeroed payload struct of event type typ (the
// Decoder's own, or a new one) with its address and fields.
func (d *fastScan) target(typ string) (fastPayload, unsafe.Pointer, []payloadField) {
	switch r := d.dec; typ {
	case TypePlatformRecord:
		p := reusedOrNew(r, func(d *Decoder) *PlatformRecord { return &d.record })
		return p, unsafe.Pointer(p), platformRecordFields
	case TypeProviderObservation:
		p := reusedOrNew(r, func(d *Decoder) *Observation { return &d.observation })
		return p, unsafe.Pointer(p), observationFields
	case TypeScanCompleted:
		p := reusedOrNew(r, func(d *Decoder) *ScanCompleted { return &d.scanCompleted })
		return p, unsafe.Pointer(p), scanCompletedFields
	case TypeHeartbeat:
		p := reusedOrNew(r, func(d *Decoder) *Heartbeat { return &d.heartbeat })
		return p, unsafe.Pointer(p), heartbeatFields
	case TypeUsageRecorded:
		p := reusedOrNew(r, func(d *Decoder) *Usage { return &d.usage })
		return p, unsafe.Pointer(p), usageFields
	case TypeBillingRated:
		p := reusedOrNew(r, func(d *Decoder) *Rated { return &d.rated })
		return p, unsafe.Pointer(p), ratedFields
	case TypeLedgerEntry:
		p := reusedOrNew(r, func(d *Decoder) *LedgerEntry { return &d.ledger })
		return p, unsafe.Pointer(p), ledgerEntryFields
	case TypeCommand:
		p := reusedOrNew(r, func(d *Decoder) *Command { return &d.command })
		return p, unsafe.Pointer(p), commandFields
	case TypeArtifact:
		p := reusedOrNew(r, func(d *Decoder) *Artifact { return &d.artifact })
		return p, unsafe.Pointer(p), artifactFields
	case TypePolicyBundle:
		p := reusedOrNew(r, func(d *Decoder) *PolicyBundle { return &d.bundle })
		return p, unsafe.Pointer(p), policyBundleFields
	}
	panic("BUG: fast path target of an unknown event type " + typ)
}

// reusedOrNew returns the Decoder's own payload struct (slot), zeroed, or
// a new one when there is no Decoder (the Validator hands payloads out).
func reusedOrNew[T any](dec *Decoder, slot func(*Decoder) *T) *T {
	if dec == nil {
		return new(T)
	}
	p := slot(dec)
	var zero T
	*p = zero
	return p
}

// object decodes the payload object at b[i] ('{') into the struct at base
// with the given fields and returns the index after it and, when d.digest,
// its hash as PayloadDigest's scanner hashes it (before the final mix).
func (d *fastScan) object(i int, base unsafe.Pointer, fields []payloadField) (int, uint64, bool) {
	b := d.b
	var (
		seen uint32
		unk  unknownKeys
		next int    // the field expected next
		sum  uint64 // the members' hashes (digest)
		n    uint64 // the members (digest)
	)
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, objectHash(0, 0), true
	}
	for {
		f := -1
		for j := next; j < len(fields); j++ { // omitempty fields skip ahead
			if q := &fields[j].quoted; q.at(b, i) {
				f, i = j, i+q.n
				break
			}
		}
		if f < 0 {
			koff, kend, ok := d.key(i)
			if !ok {
				return 0, 0, false
			}
			for j := range fields {
				if string(b[koff:kend-1]) == fields[j].name {
					f = j
					break
				}
			}
			if i, ok = d.colon(kend); !ok {
				return 0, 0, false
			}
			if f < 0 {
				if !unk.add(b, koff, kend-1-koff) {
					return 0, 0, false
				}
				v := skipSpace(b, i)
				if i, ok = d.scalar(v); !ok {
					return 0, 0, false
				}
				if d.digest {
					s := digestScanner{b: b[v:i]}
					sum += memberHash(strHash(b[koff:kend-1])^tagString, s.value())
					n++
				}
				goto next
			}
		}
		if seen&(1<<f) != 0 {
			return 0, 0, false
		}
		seen |= 1 << f
		next = f + 1
		if i = skipSpace(b, i); i >= len(b) {
			return 0, 0, false
		} else {
			var (
				ok bool
				h  uint64 // the value's hash (digest)
				v  = i
			)
			p := unsafe.Add(base, fields[f].off)
			switch fields[f].kind {
			case kindString:
				*(*string)(p), i, ok = d.stringValue(i, false)
				if d.digest {
					h = stringHash(*(*string)(p))
				}
			case kindInt64:
				*(*int64)(p), i, ok = d.int64Value(i)
				if d.digest && ok {
					h = strHash(b[v:i]) ^ tagNumber
				}
			case kindFloat64:
				*(*float64)(p), i, ok = d.float64Value(i)
				if d.digest && ok {
					h = strHash(b[v:i]) ^ tagNumber
				}
			case kindBool:
				*(*bool)(p), i, ok = d.boolValue(i)
				if h = tagFalse; *(*bool)(p) {
					h = tagTrue
				}
			case kindTime:
				// A time is a string without escapes (escaped times go to
				// the reference decoder).
				*(*time.Time)(p), i, ok = d.timeValue(i)
				if d.digest && ok {
					h = strHash(b[v+1:i-1]) ^ tagString
				}
			case kindStrings:
				var list []string
				list, i, ok = d.listValue(i, fields[f].list)
				*(*[]string)(p) = list
				if d.digest {
					h = listHash(b[v], list)
				}
			case kindObject:
				// A nested object of flat fields (authority, desired):
				// null goes to the reference decoder.
				if b[i] != '{' {
					return 0, 0, false
				}
				i, h, ok = d.object(i, p, fields[f].sub)
			}
			if !ok {
				return 0, 0, false
			}
			if d.digest {
				sum += memberHash(fields[f].keyHash, h)
				n++
			}
		}
	next:
		if i+1 < len(b) && b[i] == ',' && b[i+1] == '"' { // compact JSON
			i++
			continue
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return 0, 0, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, objectHash(n, sum), true
		default:
			return 0, 0, false
		}
	}
}

// stringHash is the digest's hash of a string value by its decoded text.
func stringHash(s string) uint64 {
	return strHash(unsafe.Slice(unsafe.StringData(s), len(s))) ^ tagString
}

// listHash is the digest's hash of a decoded list of strings whose JSON
// value starts with the byte first: null or an array.
func listHash(first byte, list []string) uint64 {
	if first == 'n' {
		return tagNull
	}
	h := uint64(tagArray)
	for _, s := range list {
		h = mix(h, stringHash(s))
	}
	return h
}

// key checks the object key at b[i], which must be a string without
// escapes, and returns where its body starts and the index after its
// closing quote.
func (d *fastScan) key(i int) (koff, kend int, ok bool) {
	if i >= len(d.b) || d.b[i] != '"' {
		return 0, 0, false
	}
	kend, esc, ok := d.str(i)
	return i + 1, kend, ok && !esc
}

// colon checks the colon after a key ending at b[i] (whitespace around it
// allowed) and returns the index after it.
func (d *fastScan) colon(i int) (int, bool) {
	i = skipSpace(d.b, i)
	if i >= len(d.b) || d.b[i] != ':' {
		return 0, false
	}
	return i + 1, true
}

// skipObject returns the index after the object at b[i], found by
// matching brackets outside strings only: what lies between is checked
// when the object is decoded.
func skipObject(b []byte, i int) (int, bool) {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1, true
			}
		}
		i++
	}
	return 0, false
}

// str checks the string whose opening quote is b[i] as Scan does (escapes,
// control characters, UTF-8) and returns the index after its closing quote
// and whether it holds escapes.
func (d *fastScan) str(i int) (end int, escaped, ok bool) {
	q := plainQuote(d.b, i+1)
	if q >= 0 {
		return q + 1, false, true
	}
	return d.strRest(^q)
}

// plainQuote returns the index of the quote that closes a string whose
// body starts at b[i] and is plain up to it (ASCII, no escapes or control
// characters). Otherwise it returns ^j, b[j] being the first byte it left
// undecided and every byte of the body before it plain: the start of the
// word holding a byte that is not plain, or of the last bytes of b, which
// do not fill a word. It looks eight bytes at a time: the lowest byte
// flagged by special is the first that is not plain (a flag above it may
// be a borrow), and is taken from the word already loaded. Small enough to
// be inlined into the string decoders.
func plainQuote(b []byte, i int) int {
	for ; len(b)-i >= 8; i += 8 {
		x := binary.LittleEndian.Uint64(b[i : i+8])
		if m := special(x); m != 0 {
			n := bits.TrailingZeros64(m)
			if byte(x>>(n&^7)) != '"' {
				break
			}
			return i + n>>3
		}
	}
	return ^i
}

// strRest is str from b[i] on, every byte of the string before b[i] being
// plain: what plainQuote leaves undecided (escapes, bytes above 0x7f,
// control characters, the last bytes of the line).
func (d *fastScan) strRest(i int) (end int, escaped, ok bool) {
	b := d.b
	for {
		// Eight bytes at a time, as in plainQuote.
		if i+8 <= len(b) {
			m := special(binary.LittleEndian.Uint64(b[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		} else {
			for i < len(b) && plainByte[b[i]] {
				i++
			}
			if i >= len(b) {
				return 0, false, false
			}
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, true
		case c == '\\':
			if i+1 >= len(b) {
				return 0, false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
					return 0, false, false
				}
				i += 6
			default:
				return 0, false, false
			}
			escaped = true
		case c < 0x20:
			return 0, false, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				return 0, false, false
			}
			i += n
		}
	}
}

// special sets the high bit of the lowest byte of x (little endian) that
// is a quote, a backslash, below 0x20 or above 0x7f, and possibly of
// bytes above it. Up to that byte no subtraction borrows and each result
// byte keeps its high bit clear (a plain byte is at least 0x20 and differs
// from the quote and the backslash); at it, x-0x20 sets the high bit of a
// control character, (x^c)-1 that of c, and x itself has it above 0x7f.
// Where a subtraction sets the high bit of a byte above 0x7f, x has set it
// already, so the subtractions need no mask.
func special(x uint64) uint64 {
	return (x | (x - 0x20*lsb) | ((x ^ '"'*lsb) - lsb) | ((x ^ '\\'*lsb) - lsb)) & msb
}

// plainByte is true for the bytes a string holds as they are: ASCII, not
// a control character, a quote or a backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plainString returns the body of the string at b[i], which must hold no
// escapes.
func (d *fastScan) plainString(i int) ([]byte, int, bool) {
	b := d.b
	if b[i] != '"' {
		return nil, 0, false
	}
	q := plainQuote(b, i+1)
	if q >= 0 {
		return b[i+1 : q], q + 1, true
	}
	end, esc, ok := d.strRest(^q)
	if !ok || esc {
		return nil, 0, false
	}
	return d.b[i+1 : end-1], end, true
}

// stringValue decodes the string at b[i]. Escapes in payload strings are
// unescaped here too, except \u escapes of surrogates, which go to the
// reference decoder (whose payload decoding treats lone surrogates its own
// way).
func (d *fastScan) stringValue(i int, envelope bool) (string, int, bool) {
	b := d.b
	if b[i] != '"' {
		return "", 0, false
	}
	q := plainQuote(b, i+1)
	if q >= 0 {
		switch {
		case q == i+1:
			return "", q + 1, true
		case d.zeroCopy:
			return unsafe.String(&b[i+1], q-i-1), q + 1, true
		}
		return string(b[i+1 : q]), q + 1, true
	}
	end, esc, ok := d.strRest(^q)
	if !ok {
		return "", 0, false
	}
	body := d.b[i+1 : end-1]
	switch {
	case len(body) == 0:
		return "", end, true
	case esc:
		if !envelope && hasSurrogateEscape(body) {
			return "", 0, false
		}
		return string(appendUnescaped(make([]byte, 0, len(body)), body)), end, true
	case d.zeroCopy:
		return unsafe.String(&body[0], len(body)), end, true
	}
	return string(body), end, true
}

// hasSurrogateEscape reports whether the string body b (already checked)
// holds a \u escape of a UTF-16 surrogate.
func hasSurrogateEscape(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] == 'u' && hex4(b[i+2:i+6])&0xf800 == 0xd800 {
			return true
		}
		i++ // the escaped character
	}
	return false
}

// number checks the JSON number at b[i] and returns the index after it.
func (d *fastScan) number(i int) (int, bool) { return numberEnd(d.b, i) }

func (d *fastScan) literal(i int, lit string) (int, bool) {
	if len(d.b)-i < len(lit) || string(d.b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// scalar checks the value of an unknown field: a string, number, true,
// false or null. Objects and arrays go to the reference decoder.
func (d *fastScan) scalar(i int) (int, bool) {
	if i >= len(d.b) {
		return 0, false
	}
	switch c := d.b[i]; {
	case c == '"':
		end, _, ok := d.str(i)
		return end, ok
	case c == '-' || c >= '0' && c <= '9':
		return d.number(i)
	case c == 't':
		return d.literal(i, "true")
	case c == 'f':
		return d.literal(i, "false")
	case c == 'n':
		return d.literal(i, "null")
	}
	return 0, false
}

// int64Value decodes a plain non-negative integer of at most 18 digits
// (no overflow, no sign, fraction or exponent).
func (d *fastScan) int64Value(i int) (int64, int, bool) {
	b := d.b
	var n int64
	j := i
	for ; j < len(b) && b[j] >= '0' && b[j] <= '9'; j++ {
		n = n*10 + int64(b[j]-'0')
	}
	if j == i || j-i > 18 || (b[i] == '0' && j-i > 1) {
		return 0, 0, false
	}
	if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		return 0, 0, false
	}
	return n, j, true
}

// float64Value decodes a number as strconv.ParseFloat does (as the
// reference decoder does), with plain integers of at most 15 digits, which
// a float64 holds exactly, converted directly.
func (d *fastScan) float64Value(i int) (float64, int, bool) {
	end, ok := d.number(i)
	if !ok {
		return 0, 0, false
	}
	num := d.b[i:end]
	if len(num) <= 15 && num[0] != '-' {
		var n int64
		plain := true
		for _, c := range num {
			if c < '0' || c > '9' {
				plain = false
				break
			}
			n = n*10 + int64(c-'0')
		}
		if plain {
			return float64(n), end, true
		}
	}
	f, err := strconv.ParseFloat(unsafe.String(&num[0], len(num)), 64)
	if err != nil {
		return 0, 0, false
	}
	return f, end, true
}

func (d *fastScan) boolValue(i int) (bool, int, bool) {
	switch d.b[i] {
	case 't':
		end, ok := d.literal(i, "true")
		return true, end, ok
	case 'f':
		end, ok := d.literal(i, "false")
		return false, end, ok
	}
	return false, 0, false
}

// timeValue decodes a payload time as the reference decoder does
// (iso8601.Parse of the string's bytes).
func (d *fastScan) timeValue(i int) (time.Time, int, bool) {
	body, end, ok := d.plainString(i)
	if !ok || len(body) == 0 {
		return time.Time{}, 0, false
	}
	t, err := iso8601.Parse(unsafe.String(&body[0], len(body)))
	if err != nil {
		return time.Time{}, 0, false
	}
	return t, end, true
}

// listValue decodes an array of strings (null is a nil slice, [] an empty
// one), into the Decoder's reused array of list when there is one.
func (d *fastScan) listValue(i int, list listSlot) ([]string, int, bool) {
	b := d.b
	if b[i] == 'n' {
		end, ok := d.literal(i, "null")
		return nil, end, ok
	}
	if b[i] != '[' {
		return nil, 0, false
	}
	var tags []string
	if d.dec != nil {
		tags = d.dec.lists[list][:0]
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		if tags == nil {
			tags = []string{}
		}
		return tags, i + 1, true
	}
	for {
		if i >= len(b) {
			return nil, 0, false
		}
		s, end, ok := d.stringValue(i, false)
		if !ok {
			return nil, 0, false
		}
		tags = append(tags, s)
		i = skipSpace(b, end)
		if i >= len(b) {
			return nil, 0, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			if d.dec != nil {
				d.dec.lists[list] = tags
			}
			return tags, i + 1, true
		default:
			return nil, 0, false
		}
	}
}

// A fieldKind is how the fast path decodes a payload field.
type fieldKind uint8

const (
	kindString fieldKind = iota
	kindInt64
	kindFloat64
	kindBool
	kindTime
	kindStrings
	kindObject // a struct of fields of the kinds above
)

// listSlot names the Decoder's reused backing array of a string list: one
// per list field, as one payload may hold several.
type listSlot uint8

const (
	listTags listSlot = iota
	listControllerIDs
	listDomains
	numLists
)

// listSlots maps the json name of each string list field to its slot.
var listSlots = map[string]listSlot{"tags": listTags, "controller_ids": listControllerIDs, "domains": listDomains}

// payloadField describes a field of a payload struct, from its json tag
// (the name the reference decoder matches exactly).
type payloadField struct {
	name    string
	quoted  quotedKey
	keyHash uint64 // the digest's hash of the key
	kind    fieldKind
	off     uintptr        // offset in the struct
	list    listSlot       // kindStrings: the Decoder's array it reuses
	sub     []payloadField // kindObject: the nested struct's fields
}

// The fields of each payload struct, in struct order: the order the Go
// producers write them, which the fast path tries first.
var (
	platformRecordFields = fieldsOf[PlatformRecord]()
	observationFields    = fieldsOf[Observation]()
	scanCompletedFields  = fieldsOf[ScanCompleted]()
	heartbeatFields      = fieldsOf[Heartbeat]()
	usageFields          = fieldsOf[Usage]()
	ratedFields          = fieldsOf[Rated]()
	ledgerEntryFields    = fieldsOf[LedgerEntry]()
	commandFields        = fieldsOf[Command]()
	artifactFields       = fieldsOf[Artifact]()
	policyBundleFields   = fieldsOf[PolicyBundle]()
)

func fieldsOf[T any]() []payloadField { return fieldsOfType(reflect.TypeFor[T](), true) }

// fieldsOfType builds the fields of struct type t; top is false for a
// nested struct, whose fields must be flat.
func fieldsOfType(t reflect.Type, top bool) []payloadField {
	if t.NumField() > 32 {
		panic("BUG: " + t.Name() + " has more fields than the fast path's seen mask")
	}
	fields := make([]payloadField, t.NumField())
	for i := range fields {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		f := payloadField{name: name, quoted: newQuotedKey(name), keyHash: stringHash(name), off: sf.Offset}
		switch {
		case sf.Type == reflect.TypeFor[time.Time]():
			f.kind = kindTime
		case sf.Type == reflect.TypeFor[[]string]():
			f.kind = kindStrings
			slot, ok := listSlots[name]
			if !ok {
				panic("BUG: the fast path has no list slot for " + t.Name() + "." + sf.Name)
			}
			f.list = slot
		case sf.Type.Kind() == reflect.Struct && top:
			f.kind = kindObject
			f.sub = fieldsOfType(sf.Type, false)
		case sf.Type.Kind() == reflect.String:
			f.kind = kindString
		case sf.Type.Kind() == reflect.Int64:
			f.kind = kindInt64
		case sf.Type.Kind() == reflect.Float64:
			f.kind = kindFloat64
		case sf.Type.Kind() == reflect.Bool:
			f.kind = kindBool
		default:
			panic("BUG: the fast path cannot decode " + t.Name() + "." + sf.Name)
		}
		if name == "" || name == "-" || strconv.Quote(name) != `"`+name+`"` {
			panic("BUG: the fast path cannot match the key of " + t.Name() + "." + sf.Name)
		}
		fields[i] = f
	}
	return fields
}

// envQuoted holds the envelope keys as compact JSON writes them.
var envQuoted = func() (q [nFields]quotedKey) {
	for f, name := range fieldNames {
		q[f] = newQuotedKey(name)
	}
	return q
}()

// quotedKey is a key as compact JSON writes it, "name": (quote, name,
// quote, colon), held as the words that find it in place: the fast path
// compares the key it expects next with four 8-byte loads rather than a
// call to memequal. The words are those at offsets 0, 8 and 16 and the
// last eight bytes, the offsets clamped to the key (they overlap in keys
// shorter than 32 bytes); a key shorter than eight bytes is one word
// compared under a mask.
type quotedKey struct {
	n    int // length of the quoted key
	need int // bytes the comparison loads: max(n, 8), or more than any line
	off  [4]uintptr
	w    [4]uint64
	mask uint64
}

// newQuotedKey returns the quoted key of name, which needs no escapes. A
// key longer than 32 bytes (there is none) never matches in place and is
// looked up as a key the fast path did not expect.
func newQuotedKey(name string) quotedKey {
	q := `"` + name + `":`
	k := quotedKey{n: len(q), need: max(len(q), 8), mask: ^uint64(0)}
	if len(q) > 32 {
		k.need = MaxEventLen + 1
		return k
	}
	padded := make([]byte, k.need)
	copy(padded, q)
	if len(q) < 8 {
		k.mask >>= 64 - 8*len(q)
	}
	for j := range k.off {
		k.off[j] = uintptr(min(8*j, k.need-8))
		if j == len(k.off)-1 {
			k.off[j] = uintptr(k.need - 8)
		}
		k.w[j] = binary.LittleEndian.Uint64(padded[k.off[j]:]) & k.mask
	}
	return k
}

// at reports whether b[i:] starts with the quoted key. It is kept small
// enough to be inlined: a call costs about as much as the comparison.
func (k *quotedKey) at(b []byte, i int) bool {
	if len(b)-i < k.need {
		return false
	}
	// In bounds: every word ends within need bytes of b[i].
	p := unsafe.Pointer(&b[i])
	return ((binary.LittleEndian.Uint64((*[8]byte)(p)[:])^k.w[0])|
		(binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(p, k.off[1]))[:])^k.w[1])|
		(binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(p, k.off[2]))[:])^k.w[2])|
		(binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(p, k.off[3]))[:])^k.w[3]))&k.mask == 0
}
