package harness

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

// TestSQLiteDurabilitySettings checks that both SQLite drivers really run
// with WAL mode and synchronous=FULL: the comparison is void otherwise.
func TestSQLiteDurabilitySettings(t *testing.T) {
	for _, c := range []struct{ driver, dsn string }{
		{"sqlite3", sqliteDSN(filepath.Join(t.TempDir(), "a.db"))},
		{"sqlite", riverSQLiteDSN(filepath.Join(t.TempDir(), "b.db"))},
	} {
		db, err := sql.Open(c.driver, c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		var mode string
		var sync, cache int
		ctx := context.Background()
		if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&cache); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || sync != 2 || cache != -131072 {
			t.Errorf("%s: journal_mode %s, synchronous %d, cache_size %d; want wal, 2 (FULL), -131072", c.driver, mode, sync, cache)
		}
		db.Close()
	}
}
