package api

import (
	"errors"
	"fmt"
	"strings"

	"github.com/driftline/driftline/pipeline/api/apitypes"
)

// ErrNotFound is returned by Client methods when the server answers 404,
// wrapped in an *APIError.
var ErrNotFound = errors.New("not found")

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

// APIError is a non-2xx answer seen by Client.
type APIError struct {
	StatusCode int
	Body       apitypes.ErrorBody // decoded error body; Error holds the raw body if it was not JSON
}

func (e *APIError) Error() string {
	return fmt.Sprintf("query api: %d: %s", e.StatusCode, e.Body.Error)
}

// Unwrap lets errors.Is(err, ErrNotFound) match a 404.
func (e *APIError) Unwrap() error {
	if e.StatusCode == 404 {
		return ErrNotFound
	}
	return nil
}
