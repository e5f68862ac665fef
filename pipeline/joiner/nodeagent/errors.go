package nodeagent

// OptionsError says which Options field is invalid and why.
type OptionsError struct {
	Field  string // Options field
	Detail string // what is wrong and what to change
}

func (e *OptionsError) Error() string { return "nodeagent options: " + e.Field + ": " + e.Detail }
