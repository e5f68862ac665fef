package rater

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/driftline/driftline/pipeline/billing/pricebook"
	"github.com/driftline/driftline/pipeline/contract"
	"github.com/driftline/driftline/pipeline/contract/decimal"
)

// Producer is the envelope producer of every rated line.
const Producer = "rater"

// ActorID is the actor_id header the rater stamps on what it writes.
const ActorID = "SYSTEM::rater"

// Rating is the outcome of pricing one usage event: either a rated line
// (Reason == "") or a reason it was not rated.
type Rating struct {
	Reason   contract.Reason
	Detail   string
	Unit     *pricebook.Unit // the unit version used (also set for retired units)
	Quantity decimal.Dec
	Amount   decimal.Dec
}

// Rate prices usage u with book: amount = quantity × unit_price, rounded
// half-to-even to the unit's precision (CONTRACT 3.5). currencies, when
// not nil, is the set of currencies the rater may bill. It never guesses:
// an unknown or retired unit, a quantity that is negative or not exact, a
// currency outside the set and an amount out of range are reasons, not
// ratings. It does not allocate unless it returns a reason.
func Rate(book *pricebook.Book, currencies map[string]bool, u *contract.Usage) Rating {
	unit, err := book.Lookup(u.UnitID)
	switch {
	case errors.Is(err, pricebook.ErrUnknownUnit):
		return Rating{Reason: contract.ReasonUnknownUnit, Detail: "unit " + strconv.Quote(u.UnitID) + " is not in the price book"}
	case errors.Is(err, pricebook.ErrRetiredUnit):
		return Rating{Reason: contract.ReasonRetiredUnit, Unit: unit, Detail: "unit " + strconv.Quote(u.UnitID) + " version " + strconv.FormatInt(unit.Version, 10) + " is retired"}
	case err != nil:
		panic("BUG: unexpected price book lookup error: " + err.Error())
	}
	q, err := decimal.Parse(u.Quantity)
	if err != nil {
		return Rating{Reason: contract.ReasonBadQuantity, Unit: unit, Detail: "quantity " + strconv.Quote(u.Quantity) + ": " + err.Error()}
	}
	if q.Sign() < 0 {
		return Rating{Reason: contract.ReasonBadQuantity, Unit: unit, Detail: "quantity " + strconv.Quote(u.Quantity) + " is negative"}
	}
	if currencies != nil && !currencies[unit.Currency] {
		return Rating{Reason: contract.ReasonCurrencyNotAllowed, Unit: unit, Detail: "unit " + strconv.Quote(u.UnitID) + " is priced in " + unit.Currency + ", which this rater may not bill"}
	}
	amount, err := decimal.MulRound(q, unit.UnitPrice, unit.Precision)
	if err != nil {
		return Rating{Reason: contract.ReasonAmountOutOfRange, Unit: unit, Detail: "quantity " + u.Quantity + " × " + unit.UnitPriceText + ": " + err.Error()}
	}
	return Rating{Unit: unit, Quantity: q, Amount: amount}
}

// RatedEventID is the event_id of the rated line of usageID. It is derived
// from the usage_id alone, so a rated line written again for the same
// usage (by a rater that crashed before its transaction committed) repeats
// it and downstream dedupe recognises it.
//
// It is "rated:" and the usage_id, or "rated:sha256:" and the hex SHA-256
// of the usage_id when the first would be longer than an event_id may be
// (contract.MaxIDLen), or when the usage_id is itself "sha256:" and 64
// lowercase hex digits: the first form of such a usage_id would be the
// second form of another. Two usage_ids therefore share a rated event_id
// only if their SHA-256 collide. No form is free even of that: a usage_id
// may be any string of any length, while an event_id is a string of at
// most 128 bytes (CONTRACT 2), and both may hold any character (the
// decoder takes every valid UTF-8 string, control characters escaped):
// there are more usage_ids than event_ids, and no character that an
// event_id may hold and a usage_id may not, to mark a digest with.
func RatedEventID(usageID string) string {
	if literalEventID(usageID) {
		return ratedPrefix + usageID
	}
	sum := sha256.Sum256([]byte(usageID))
	return ratedPrefix + hashedTag + hex.EncodeToString(sum[:])
}

// ratedPrefix begins every rated event_id; hashedTag follows it in one
// made from the digest of the usage_id (RatedEventID).
const (
	ratedPrefix = "rated:"
	hashedTag   = "sha256:"
)

// literalEventID reports whether the rated event_id of usageID holds the
// usage_id itself (RatedEventID): it fits, and it does not look like one
// made from a digest.
func literalEventID(usageID string) bool {
	if len(ratedPrefix)+len(usageID) > contract.MaxIDLen {
		return false
	}
	if len(usageID) != len(hashedTag)+2*sha256.Size || usageID[:len(hashedTag)] != hashedTag {
		return true
	}
	for _, c := range []byte(usageID[len(hashedTag):]) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return true
		}
	}
	return false
}

// AppendRated appends the billing.rated envelope of a successful rating to
// dst. The envelope keeps the usage's occurred_at (event time) and
// correlation_id; rated_at is the wall-clock time of rating.
func AppendRated(dst []byte, env *contract.Envelope, u *contract.Usage, r *Rating, environment string, ratedAt time.Time) []byte {
	var buf [32]byte
	return appendRated(dst, env, u, r, environment, ratedAt.UTC().AppendFormat(buf[:0], ratedAtLayout))
}

// ratedAtLayout is the form of rated_at: UTC, milliseconds.
const ratedAtLayout = "2006-01-02T15:04:05.000Z07:00"

// appendRated is AppendRated with rated_at formatted already (ratedAtLayout).
func appendRated(dst []byte, env *contract.Envelope, u *contract.Usage, r *Rating, environment string, ratedAt []byte) []byte {
	dst = append(dst, `{"event_id":`...)
	dst = appendRatedEventID(dst, u.UsageID)
	dst = append(dst, `,"event_type":"billing.rated","schema_version":1,"producer":"rater","occurred_at":"`...)
	dst = env.OccurredAt.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, '"')
	if env.CorrelationID != "" {
		dst = append(dst, `,"correlation_id":`...)
		dst = appendString(dst, env.CorrelationID)
	}
	dst = append(dst, `,"environment":`...)
	dst = appendString(dst, environment)
	dst = append(dst, `,"payload":{"usage_id":`...)
	dst = appendString(dst, u.UsageID)
	dst = append(dst, `,"metering_source":`...)
	dst = appendString(dst, u.MeteringSource)
	dst = append(dst, `,"metering_id":`...)
	dst = appendString(dst, u.MeteringID)
	dst = append(dst, `,"unit_id":`...)
	dst = appendString(dst, r.Unit.UnitID)
	dst = append(dst, `,"unit_version":`...)
	dst = strconv.AppendInt(dst, r.Unit.Version, 10)
	dst = append(dst, `,"quantity":"`...)
	dst = r.Quantity.Append(dst)
	dst = append(dst, `","unit_price":"`...)
	dst = r.Unit.UnitPrice.Append(dst)
	dst = append(dst, `","amount":"`...)
	dst = r.Amount.Append(dst)
	dst = append(dst, `","currency":`...)
	dst = appendString(dst, r.Unit.Currency)
	dst = append(dst, `,"tenant_id":`...)
	dst = appendString(dst, u.TenantID)
	dst = append(dst, `,"product_id":`...)
	dst = appendString(dst, u.ProductID)
	dst = append(dst, `,"rated_at":"`...)
	dst = append(dst, ratedAt...)
	return append(dst, `"}}`...)
}

func appendRatedEventID(dst []byte, usageID string) []byte {
	if literalEventID(usageID) {
		dst = append(append(dst, '"'), ratedPrefix...)
		return append(appendStringBody(dst, usageID), '"')
	}
	return appendString(dst, RatedEventID(usageID))
}

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	return append(appendStringBody(append(dst, '"'), s), '"')
}

// appendStringBody appends s escaped for a JSON string, without quotes.
// Invalid UTF-8 becomes U+FFFD, as encoding/json does.
func appendStringBody(dst []byte, s string) []byte { return appendEscaped(dst, s, true) }

// appendEscaped is appendStringBody; words says whether it skips plain
// ASCII eight bytes at a time (false: byte by byte, the reference its
// tests hold the skip to).
func appendEscaped(dst []byte, s string, words bool) []byte {
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs a look: the ids, keys
		// and names of usage are plain ASCII.
		if words && i+8 <= len(s) && plain8(binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))) {
			i += 8
			continue
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				const hexd = "0123456789abcdef"
				dst = append(dst, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\u202`...)
			dst = append(dst, byte('8'+r-'\u2028'))
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// plain8 reports whether the eight bytes of x (one per byte) are all
// ASCII that a JSON string holds as is: none below 0x20, none '"' or
// '\\', none 0x80 or above. The tests below are exact for "any byte
// is": a false is only a cue to look byte by byte.
func plain8(x uint64) bool {
	const (
		ones = 0x0101010101010101
		high = 0x8080808080808080
	)
	below := (x - 0x20*ones) &^ x & high
	q := x ^ '"'*ones
	quote := (q - ones) &^ q & high
	b := x ^ '\\'*ones
	backslash := (b - ones) &^ b & high
	return (below | quote | backslash | x&high) == 0
}
