// Package chdb opens connections to the ClickHouse read model and keeps
// its schema current.
//
// Open speaks the native protocol (clickhouse-go/v2) with settings that
// work on every server the project supports, from Debian's 18.16 to
// current releases, and creates the configured database if it is missing.
// Migrate applies the embedded migrations of schema/clickhouse (package
// chschema) in order, each once, and records them in the table
// schema_migrations of that database.
package readmodel
