package fleet

import (
	"errors"
	"fmt"
)

// ConfigError says which Config field is invalid and why.
type ConfigError struct {
	Field  string // Config field, dotted ("Drift.Missing")
	Detail string // what is wrong and, where useful, what to change
}

func (e *ConfigError) Error() string { return "fleet config: " + e.Field + ": " + e.Detail }

// ErrPopulation is wrapped by Validate errors when the requested rates need
// more resources than a family has.
var ErrPopulation = errors.New("rates exceed the population")

// StatusError is returned by Feed when the ingest gateway answers a batch
// with a status that is not retried (4xx other than 429, or a 5xx after the
// retries ran out).
type StatusError struct {
	StatusCode int    // HTTP status
	Body       string // start of the response body
	Batch      int    // 0-based index of the failing batch
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("ingest answered batch %d with HTTP %d: %s", e.Batch, e.StatusCode, e.Body)
}
