package api

import (
	"fmt"
	"strings"

	"github.com/driftline/driftline/pipeline/api/apitypes"
)

// ParamError says why a query parameter was refused. The server answers it
// as 400 with an ErrorBody.
type ParamError struct {
	Param   string   // parameter name
	Value   string   // offending value
	Allowed []string // allowed values, for enumerations
	Reason  string   // what is wrong, lowercase
}

func (e *ParamError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "parameter %s", e.Param)
	if e.Value != "" {
		fmt.Fprintf(&b, "=%q", e.Value)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if len(e.Allowed) > 0 {
		fmt.Fprintf(&b, "; allowed: %s", strings.Join(e.Allowed, ", "))
	}
	return b.String()
}

func (e *ParamError) body() apitypes.ErrorBody {
	return apitypes.ErrorBody{Error: e.Error(), Parameter: e.Param, Value: e.Value, Allowed: e.Allowed}
}
