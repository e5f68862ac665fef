package contract

import (
	"encoding/binary"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// Digest is the content digest of a valid event: a 64-bit hash of the
// fields that say what the event is, in a canonical form. Two deliveries
// of one event (a redelivery) have the same digest; an event that repeats
// a dedupe identity with other content (a producer reusing an event_id or
// a seq) has another one, which the gateway and every consumer tell apart
// from a redelivery (ReasonConflictingDuplicate, BillingConflictingUsage).
//
// What it covers: event_type, schema_version, occurred_at as an instant
// (so "10:15:30Z" and "12:15:30+02:00" are one time), correlation_id, and
// the payload. Not the dedupe identity itself (producer, seq or event_id):
// with seq present, a new event_id under a seen seq is the same identity
// with other content only if the rest differs. Not environment, which is
// the pipeline's own for every accepted event.
//
// The payload is canonical: key order and whitespace between tokens do
// not matter, and strings are compared by their decoded text ("\u0041" is
// "A"). Numbers are compared as written (1 and 1.0 differ; the contract
// writes quantities as decimal strings). Arrays are ordered.
//
// A digest is a hash: two different contents share one with probability
// 2^-64, and such a conflict would pass for a redelivery. It never decides
// that two distinct identities are one (dedupe stays exact on the identity).
type Digest uint64

// String returns the digest as 16 lower-case hex digits, the form
// receipts, quarantine records and findings name it in.
func (d Digest) String() string {
	var b [16]byte
	return string(d.AppendHex(b[:0]))
}

// AppendHex appends the 16 hex digits of d to b.
func (d Digest) AppendHex(b []byte) []byte {
	const hex = "0123456789abcdef"
	for i := 60; i >= 0; i -= 4 {
		b = append(b, hex[(d>>uint(i))&0xf])
	}
	return b
}

// Seeds of the parts of a digest, so that no part's bytes can pass for
// another's.
const (
	digestSeed   = 0x6a09e667f3bcc908
	tagString    = 0x510e527fade682d1
	tagNumber    = 0x9b05688c2b3e6c1f
	tagObject    = 0x1f83d9abfb41bd6b
	tagArray     = 0x5be0cd19137e2179
	tagTrue      = 0xbb67ae8584caa73b
	tagFalse     = 0x3c6ef372fe94f82b
	tagNull      = 0xa54ff53a5f1d36f1
	tagMember    = 0xcbbb9d5dc1059ed8
	digestPrime1 = 0x9e3779b97f4a7c15
	digestPrime2 = 0xc2b2ae3d27d4eb4f
)

// EventDigest returns the digest of a valid event (see Digest). env must
// come from the validator: its payload is well-formed JSON.
func EventDigest(env *Envelope) Digest {
	return eventDigest(env, PayloadDigest(env.Payload))
}

// eventDigest is EventDigest with the payload's digest already known (the
// single-pass decoder computes it while it decodes the payload).
func eventDigest(env *Envelope, payload Digest) Digest {
	var buf [16]byte
	h := uint64(digestSeed)
	h = mix(h, xxhash.Sum64String(env.EventType))
	h = mix(h, uint64(int64(env.SchemaVersion)))
	binary.LittleEndian.PutUint64(buf[:8], uint64(env.OccurredAt.Unix()))
	binary.LittleEndian.PutUint64(buf[8:], uint64(env.OccurredAt.Nanosecond()))
	h = mix(h, xxhash.Sum64(buf[:]))
	h = mix(h, strHash([]byte(env.CorrelationID))^tagString)
	h = mix(h, uint64(payload))
	return Digest(avalanche(h))
}

// PayloadDigest returns the canonical digest of a JSON value (the
// payload of a valid event): the part of EventDigest a usage's content is
// compared by, whatever envelope it came in.
func PayloadDigest(payload []byte) Digest {
	s := digestScanner{b: payload}
	s.space()
	return Digest(avalanche(s.value()))
}

// memberHash is the part of an object's hash one member adds (k and v
// being the hashes of its key and value): members are summed, so their
// order does not matter; a valid event has no key twice
// (ReasonDuplicateKey), so none cancel.
func memberHash(k, v uint64) uint64 {
	hi, lo := bits.Mul64(k^tagMember, v^digestPrime2)
	return hi ^ lo
}

// objectHash is the hash of an object of n members whose memberHash add
// up to sum.
func objectHash(n, sum uint64) uint64 { return mix(mix(tagObject, n), sum) }

// mix folds v into h (order matters).
func mix(h, v uint64) uint64 {
	h ^= v * digestPrime1
	h = (h<<31 | h>>33) * digestPrime2
	return h
}

// avalanche spreads every input bit over the output (xxhash's final mix).
func avalanche(h uint64) uint64 {
	h ^= h >> 33
	h *= digestPrime2
	h ^= h >> 29
	h *= 0x165667b19e3779f9
	h ^= h >> 32
	return h
}

// digestScanner hashes one well-formed JSON value without allocating.
// Malformed input (which the validator never passes on) hashes to
// something, without panicking.
type digestScanner struct {
	b []byte
	i int
}

func (s *digestScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next steps over the comma after a member or element; on anything but a
// comma or closing it gives up on the rest of the value.
func (s *digestScanner) next(closing byte) {
	if s.i < len(s.b) && s.b[s.i] == ',' {
		s.i++
		s.space()
	} else if s.i < len(s.b) && s.b[s.i] != closing {
		s.i = len(s.b)
	}
}

// value hashes the value at s.i and the whitespace after it.
func (s *digestScanner) value() uint64 {
	if s.i >= len(s.b) {
		return tagNull
	}
	var h uint64
	switch c := s.b[s.i]; {
	case c == '{':
		s.i++
		s.space()
		sum := uint64(0)
		n := uint64(0)
		for s.i < len(s.b) && s.b[s.i] != '}' {
			k := s.str()
			s.space()
			if s.i < len(s.b) && s.b[s.i] == ':' {
				s.i++
			}
			s.space()
			sum += memberHash(k, s.value())
			n++
			s.next('}')
		}
		s.i++
		h = objectHash(n, sum)
	case c == '[':
		s.i++
		s.space()
		h = tagArray
		for s.i < len(s.b) && s.b[s.i] != ']' {
			h = mix(h, s.value())
			s.next(']')
		}
		s.i++
	case c == '"':
		h = s.str()
	case c == 't':
		s.i += 4
		h = tagTrue
	case c == 'f':
		s.i += 5
		h = tagFalse
	case c == 'n':
		s.i += 4
		h = tagNull
	default: // a number, as written
		j := s.i
		for j < len(s.b) && !isDelim(s.b[j]) {
			j++
		}
		h = strHash(s.b[s.i:j]) ^ tagNumber
		s.i = j
	}
	s.space()
	return h
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// str hashes the string at s.i by its decoded text.
func (s *digestScanner) str() uint64 {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		s.i = len(s.b)
		return tagString
	}
	start := s.i + 1
	j := start
	escaped := false
	// Strings are short (field names, states, ids): look for a quote or
	// a backslash eight bytes at a time (SWAR), where a bytes.IndexByte
	// call costs more than the bytes, then byte by byte.
	for j+8 <= len(s.b) {
		w := binary.LittleEndian.Uint64(s.b[j:])
		if m := hasByte(w, '"') | hasByte(w, '\\'); m != 0 {
			j += bits.TrailingZeros64(m) / 8
			break
		}
		j += 8
	}
	for ; j < len(s.b); j++ {
		if c := s.b[j]; c == '"' {
			break
		} else if c == '\\' {
			escaped = true
			j++
		}
	}
	j = min(j, len(s.b))
	raw := s.b[start:j]
	s.i = j + 1
	if !escaped {
		return strHash(raw) ^ tagString
	}
	return unescapedHash(raw) ^ tagString
}

// hasByte returns a word whose lowest set bit is the high bit of the
// first byte of w equal to c (0 when none is).
func hasByte(w uint64, c byte) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	x := w ^ (ones * uint64(c))
	return (x - ones) &^ x & highs
}

// strHash hashes a string's bytes: xxhash above 32 bytes, and below, where
// xxhash's setup costs more than the bytes, a multiply-fold of two or four
// loads (as wyhash does).
func strHash(b []byte) uint64 {
	n := len(b)
	var a, c uint64
	switch {
	case n > 32:
		return xxhash.Sum64(b)
	case n >= 16:
		h1, l1 := bits.Mul64(binary.LittleEndian.Uint64(b)^digestPrime1, binary.LittleEndian.Uint64(b[8:])^digestPrime2)
		h2, l2 := bits.Mul64(binary.LittleEndian.Uint64(b[n-16:])^tagMember, binary.LittleEndian.Uint64(b[n-8:])^tagArray^uint64(n))
		return h1 ^ l1 ^ avalanche(h2^l2)
	case n >= 8:
		a, c = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4:
		a, c = uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[n-4:]))
	case n > 0:
		a = uint64(b[0])<<16 | uint64(b[n>>1])<<8 | uint64(b[n-1])
	}
	hi, lo := bits.Mul64(a^digestPrime1, c^digestPrime2^uint64(n))
	return hi ^ lo
}

// unescapedHash hashes the decoded text of a JSON string's raw content
// that holds escapes, decoded as the validator decodes it. Malformed
// escapes (which the validator rejects) are hashed as they are.
func unescapedHash(raw []byte) uint64 {
	if !wellEscaped(raw) {
		return strHash(raw)
	}
	var buf [256]byte
	return strHash(appendUnescaped(buf[:0], raw))
}

// wellEscaped reports whether every backslash of raw starts a complete
// JSON escape.
func wellEscaped(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+1 >= len(raw) {
			return false
		}
		switch raw[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i++
		case 'u':
			if i+6 > len(raw) {
				return false
			}
			for _, c := range raw[i+2 : i+6] {
				if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
					return false
				}
			}
			i += 5
		default:
			return false
		}
	}
	return true
}
