package harness

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"

	_ "github.com/mattn/go-sqlite3" // SQLite itself (C), for the hand-written designs
)

// sqliteDSN is every hand-written SQLite design's connection: WAL mode,
// synchronous=FULL (each commit fsyncs the WAL), transactions that take the
// write lock at BEGIN, a 128 MiB page cache, temporary tables in memory.
func sqliteDSN(path string) string {
	return "file:" + path + "?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=10000&_txlock=immediate" +
		"&_cache_size=-131072"
}

// sqliteDB is what the hand-written SQLite designs share: one connection
// (SQLite has one writer; a pool would only add SQLITE_BUSY retries), files
// in one directory.
type sqliteDB struct {
	dir string
	db  *sql.DB
}

func (s *sqliteDB) open(dir, schema string) error {
	s.dir = dir
	db, err := sql.Open("sqlite3", sqliteDSN(filepath.Join(dir, "bench.db")))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	s.db = db
	if _, err := db.Exec("PRAGMA temp_store=MEMORY"); err != nil {
		return err
	}
	_, err = db.Exec(schema)
	return err
}

func (s *sqliteDB) close() error {
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	return err
}

// tx runs fn in one transaction (BEGIN IMMEDIATE ... COMMIT: one fsync).
func (s *sqliteDB) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// insertMany runs stmt once per row in transactions of chunk rows.
func (s *sqliteDB) insertMany(ctx context.Context, stmt string, n, chunk int, args func(i int) []any) error {
	for start := 0; start < n; start += chunk {
		err := s.tx(ctx, func(tx *sql.Tx) error {
			st, err := tx.PrepareContext(ctx, stmt)
			if err != nil {
				return err
			}
			defer st.Close()
			for i := start; i < min(n, start+chunk); i++ {
				if _, err := st.ExecContext(ctx, args(i)...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// fileSize is the size of the files in the design's own directory: the
// database and its WAL.
func (s *sqliteDB) fileSize() (int64, error) {
	var total int64
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			return 0, err
		}
		total += info.Size()
	}
	return total, nil
}
