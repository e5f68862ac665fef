package stream

// Default sets *v to d when *v is its type's zero value: the rule of an
// option whose zero means "the default".
func Default[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// DefaultPositive sets *v to d unless *v is above zero: the rule of a
// size or duration that has no meaning at zero or below.
func DefaultPositive[T ~int | ~int32 | ~int64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
