package client

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/driftline/driftline/pipeline/api/apitypes"
)

// ErrNotFound is returned by Client methods when the server answers 404,
// wrapped in an *APIError.
var ErrNotFound = errors.New("not found")

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
	if e.StatusCode == http.StatusNotFound {
		return ErrNotFound
	}
	return nil
}
