package joiner

import "errors"

// errBadActionClass: a snapshot's action book names a classification the
// joiner does not derive (a corrupt or foreign snapshot, not used).
var errBadActionClass = errors.New("action book: unknown classification")
