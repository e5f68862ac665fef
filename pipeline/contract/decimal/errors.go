package decimal

import "errors"

// Errors returned by parsing and arithmetic. Money is never approximated:
// a value that cannot be represented exactly is an error, and the caller
// fails closed (quarantines the input, refuses the write).
var (
	// ErrSyntax means the string is not a contract decimal: an optional
	// minus sign, digits, and an optional '.' followed by digits.
	ErrSyntax = errors.New("decimal: not a decimal string")
	// ErrScale means a value has more than MaxScale fractional digits, or
	// a requested precision is outside [0, MaxScale].
	ErrScale = errors.New("decimal: too many fractional digits")
	// ErrRange means the value (or an intermediate result rescaled to its
	// scale) does not fit the signed 64-bit coefficient.
	ErrRange = errors.New("decimal: value out of range")
)
