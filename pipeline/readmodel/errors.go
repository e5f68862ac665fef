package readmodel

import (
	"errors"
	"fmt"
)

// ErrWrongDatabase means Migrate was given a connection whose current
// database is not the one to migrate. Migrations name their tables
// unqualified, so they would land in the wrong database.
var ErrWrongDatabase = errors.New("connection is on another database")

// ChecksumError means a migration that was already applied has changed
// since. Applied migrations are history: a change goes in a new file.
type ChecksumError struct {
	Database string
	Version  uint32
	Name     string
	Applied  string // checksum recorded when it was applied
	Current  string // checksum of the file now
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("migration %s (version %d) was applied to database %s with checksum %s, but the file now has checksum %s; "+
		"Possible solutions: restore the file and put the change in a new migration, "+
		"or, for disposable local data only, drop the database and migrate again",
		e.Name, e.Version, e.Database, e.Applied, e.Current)
}

// StatementError means a statement of a migration failed. The migration
// is not recorded, so it runs again, from its first statement, next time:
// statements must be idempotent (CREATE ... IF NOT EXISTS).
type StatementError struct {
	Name      string // migration file
	Index     int    // 1-based statement number in the file
	Statement string // the statement's text
	Err       error
}

func (e *StatementError) Error() string {
	return fmt.Sprintf("migration %s statement %d: %v\nstatement:\n%s", e.Name, e.Index, e.Err, e.Statement)
}

func (e *StatementError) Unwrap() error { return e.Err }
