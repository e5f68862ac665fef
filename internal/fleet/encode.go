package fleet

import (
	"strconv"
	"time"
)

const hexDigits = "0123456789abcdef"

// appendTime appends t as an RFC 3339 UTC time with milliseconds, quoted.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	return append(b, '"')
}

// appendPadded appends v in decimal, zero-padded to width digits.
func appendPadded(b []byte, v int, width int) []byte {
	var tmp [20]byte
	s := strconv.AppendInt(tmp[:0], int64(v), 10)
	for n := len(s); n < width; n++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// appendFingerprint appends "sha256:" and 64 hex digits derived from h.
func appendFingerprint(b []byte, h uint64) []byte {
	b = append(b, "sha256:"...)
	for j := uint64(0); j < 4; j++ {
		b = appendHex64(b, mix64(h+j*0x9e3779b97f4a7c15))
	}
	return b
}

func appendHex64(b []byte, v uint64) []byte {
	for s := 60; s >= 0; s -= 4 {
		b = append(b, hexDigits[(v>>uint(s))&0xf])
	}
	return b
}

// appendFixed appends v/10^places as a plain decimal with exactly places
// fraction digits ("12.500000"). v must not be negative.
func appendFixed(b []byte, v int64, places int) []byte {
	if v < 0 {
		panic("BUG: appendFixed of a negative value")
	}
	p := int64(1)
	for range places {
		p *= 10
	}
	b = strconv.AppendInt(b, v/p, 10)
	if places == 0 {
		return b
	}
	b = append(b, '.')
	return appendPadded(b, int(v%p), places)
}

// FormatMicros formats an amount of micro-units as a decimal string with six
// fraction digits, the form the generator writes quantities in.
func FormatMicros(v int64) string { return string(appendFixed(nil, v, 6)) }

// crockford is the ULID alphabet.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// appendULID appends a 26-character ULID: 48 bits of ms time, then 80 bits
// of which the low 64 are a bijection of counter (so ids never repeat in a
// run) and the top 16 come from the seed.
func appendULID(b []byte, ms uint64, seed uint64, counter uint64) []byte {
	return AppendULID(b, ms<<16|seed>>48, mix64(counter+seed))
}

// AppendULID appends the 128-bit id hi:lo as the 26 characters of a ULID
// (Crockford's base32, the first character carrying 3 bits); a ULID's
// 48-bit millisecond time is the top of hi.
func AppendULID(b []byte, hi, lo uint64) []byte {
	var out [26]byte
	for k := 25; k >= 0; k-- {
		out[k] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return append(b, out[:]...)
}
