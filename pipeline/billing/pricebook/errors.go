package pricebook

import (
	"errors"
	"fmt"
)

// Lookup errors: usage of such a unit is not rated (CONTRACT 3.7).
var (
	// ErrUnknownUnit means the price book has no unit of that id.
	ErrUnknownUnit = errors.New("pricebook: unknown unit")
	// ErrRetiredUnit means the unit's current version is retired.
	ErrRetiredUnit = errors.New("pricebook: retired unit")
)

// ErrInvalid is wrapped by every *InvalidError.
var ErrInvalid = errors.New("pricebook: invalid price book")

// InvalidError says why a price book was refused. A refused book never
// replaces the one in use.
type InvalidError struct {
	Index  int    // position of the offending unit in "units"; -1 for the whole file
	UnitID string // offending unit id, if known
	Field  string // offending field, if any
	Detail string
}

func (e *InvalidError) Error() string {
	switch {
	case e.Index < 0:
		return fmt.Sprintf("invalid price book: %s", e.Detail)
	case e.Field != "":
		return fmt.Sprintf("invalid price book: units[%d] (%q): %s: %s", e.Index, e.UnitID, e.Field, e.Detail)
	}
	return fmt.Sprintf("invalid price book: units[%d] (%q): %s", e.Index, e.UnitID, e.Detail)
}

// Unwrap returns ErrInvalid.
func (e *InvalidError) Unwrap() error { return ErrInvalid }
