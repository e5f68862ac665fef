// Package chschema embeds the ClickHouse migrations of the read model.
//
// Each migration is a numbered SQL file (NNN_name.sql) applied once, in
// order, inside the configured database (default "reconcile"), and
// recorded in the table schema_migrations. Statements are separated by a
// line holding only ";". Table names are never qualified with a database,
// so the same files serve the local stack, tests (one database per test)
// and production. Every statement must run on ClickHouse 18.16 (Debian's
// package) and on current releases: no DateTime64, Map or JSON types, and
// LowCardinality only with allow_experimental_low_cardinality_type=1.
package chschema

import "embed"

// Migrations holds the NNN_*.sql files.
//
//go:embed *.sql
var Migrations embed.FS
