package dedupe

import "errors"

// OptionsError says which Options field is invalid and why.
type OptionsError struct {
	Field  string // Options field
	Detail string // what is wrong and what to change
}

func (e *OptionsError) Error() string { return "dedupe options: " + e.Field + ": " + e.Detail }

// ErrSnapshot is wrapped by LoadSnapshot's errors for a snapshot whose
// content is inconsistent (as opposed to truncated, snap.ErrShort).
var ErrSnapshot = errors.New("dedupe: corrupt snapshot")
