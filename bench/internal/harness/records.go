package harness

import (
	"context"
	"database/sql"
)

// Records is the fairest SQLite design we could write for what execstore
// does (RFC 001's shape): one row per execution holding its event once, its
// status, outcome, lease token and attempts, and one nullable claimable_at
// (the due time, or the lease's expiry while leased) behind a partial index.
// The primary key refuses a repeated ID; a claim is one UPDATE ... RETURNING
// over the index; a completion is fenced by the lease token.
type Records struct{ sqlDesign }

const recordsSchema = `
CREATE TABLE IF NOT EXISTS executions (
  id TEXT PRIMARY KEY,
  workflow_id TEXT NOT NULL,
  params TEXT,
  context TEXT,
  status TEXT NOT NULL,
  outcome TEXT,
  claimable_at INTEGER,
  token INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0,
  admitted_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS executions_claimable ON executions (claimable_at, id) WHERE claimable_at IS NOT NULL;
`

const recordsInsert = `INSERT INTO executions (id, workflow_id, params, context, status, claimable_at, admitted_at, updated_at)
	VALUES (?, 'bench', NULL, NULL, 'admitted', 0, 0, 0) ON CONFLICT (id) DO NOTHING`

func (r *Records) Name() string { return "SQLite, one row per execution" }

func (r *Records) Open(_ context.Context, dir string) error {
	r.claim = r.claimTx
	r.complete = r.completeTx
	return r.open(dir, recordsSchema)
}

func (r *Records) Admit(ctx context.Context, id string) (bool, error) {
	res, err := r.db.ExecContext(ctx, recordsInsert, id)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 0, err
}

func (r *Records) AdmitBatch(ctx context.Context, ids []string) (int, error) {
	dups := 0
	err := r.tx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, recordsInsert)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, id := range ids {
			res, err := st.ExecContext(ctx, id)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				dups++
			}
		}
		return nil
	})
	return dups, err
}

func (r *Records) Fill(ctx context.Context, prefix string, from, n int) error {
	return r.insertMany(ctx, recordsInsert, n, 10_000, func(i int) []any { return []any{id(prefix, from+i)} })
}

func (r *Records) claimTx(ctx context.Context, tx *sql.Tx, now int64, limit int) ([]claimed, error) {
	rows, err := tx.QueryContext(ctx, `UPDATE executions
		SET claimable_at = ?, token = token + 1, attempts = attempts + 1, updated_at = ?
		WHERE id IN (SELECT id FROM executions WHERE claimable_at <= ? ORDER BY claimable_at, id LIMIT ?)
		RETURNING token, id, workflow_id, params, context`,
		now+int64(visibilityTimeout), now, now, limit)
	if err != nil {
		return nil, err
	}
	return scanClaimed(rows)
}

// completeTx records the outcome, fenced by the lease token: a row whose
// token moved on (another claim superseded this one) is left alone.
func (r *Records) completeTx(ctx context.Context, tx *sql.Tx, now int64, rows []claimed) error {
	st, err := tx.PrepareContext(ctx, `UPDATE executions
		SET status = 'completed', outcome = 'null', claimable_at = NULL, updated_at = ?
		WHERE id = ? AND token = ?`)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, c := range rows {
		if _, err := st.ExecContext(ctx, now, c.id, c.key); err != nil {
			return err
		}
	}
	return nil
}
