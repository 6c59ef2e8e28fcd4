package harness

import (
	"context"
	"database/sql"
)

// Yieldstar is the design execstore replaces, on SQLite: the event (workflow,
// params, context) is copied into every row that can wake an execution
// (task_queue, scheduled_tasks, store_waiters), the workflow's result is one
// more row in step_responses, and a worker hides a task by moving its
// visible_from forward (a visibility timeout) and deletes it when done.
// Nothing records the execution itself, so nothing can refuse a repeated ID.
//
// The tables are Yieldstar's. Two things are kinder than the original: a
// claim takes a whole batch with one UPDATE ... RETURNING instead of a SELECT
// of one row and an UPDATE, and a batch's results and deletions commit in
// one transaction.
type Yieldstar struct{ sqlDesign }

const yieldstarSchema = `
CREATE TABLE IF NOT EXISTS task_queue (
  task_id INTEGER PRIMARY KEY AUTOINCREMENT,
  workflow_id TEXT NOT NULL,
  execution_id TEXT NOT NULL,
  params TEXT,
  context TEXT,
  visible_from INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS scheduled_tasks (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  delay INTEGER NOT NULL,
  workflow_id TEXT NOT NULL,
  execution_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  params TEXT,
  context TEXT
);
CREATE TABLE IF NOT EXISTS store_waiters (
  workflow_id TEXT NOT NULL,
  execution_id TEXT NOT NULL,
  step_key TEXT NOT NULL,
  event TEXT NOT NULL,
  store_name TEXT NOT NULL,
  store_id TEXT NOT NULL,
  since_version INTEGER NOT NULL,
  read_paths TEXT NOT NULL,
  PRIMARY KEY (store_name, store_id, execution_id, step_key)
);
CREATE TABLE IF NOT EXISTS step_responses (
  execution_id TEXT NOT NULL,
  step_key TEXT NOT NULL,
  step_attempt INTEGER NOT NULL,
  step_done BOOL NOT NULL,
  step_response JSONB,
  PRIMARY KEY (execution_id, step_key, step_attempt)
);
CREATE INDEX IF NOT EXISTS idx_execution_step_attempt ON step_responses(execution_id, step_key, step_attempt DESC);
`

const yieldstarInsert = `INSERT INTO task_queue (workflow_id, execution_id, params, context, visible_from) VALUES ('bench', ?, NULL, '[]', 0)`

func (y *Yieldstar) Name() string { return "SQLite, Yieldstar's tables" }

func (y *Yieldstar) Open(_ context.Context, dir string) error {
	y.claim = y.claimTx
	y.complete = y.completeTx
	return y.open(dir, yieldstarSchema)
}

// Admit queues a task: there is no record to look up, so a repeated ID is
// queued again.
func (y *Yieldstar) Admit(ctx context.Context, id string) (bool, error) {
	_, err := y.db.ExecContext(ctx, yieldstarInsert, id)
	return false, err
}

func (y *Yieldstar) AdmitBatch(ctx context.Context, ids []string) (int, error) {
	return 0, y.tx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, yieldstarInsert)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, id := range ids {
			if _, err := st.ExecContext(ctx, id); err != nil {
				return err
			}
		}
		return nil
	})
}

func (y *Yieldstar) Fill(ctx context.Context, prefix string, from, n int) error {
	return y.insertMany(ctx, yieldstarInsert, n, 10_000, func(i int) []any { return []any{id(prefix, from+i)} })
}

func (y *Yieldstar) claimTx(ctx context.Context, tx *sql.Tx, now int64, limit int) ([]claimed, error) {
	rows, err := tx.QueryContext(ctx, `UPDATE task_queue SET visible_from = ?
		WHERE task_id IN (SELECT task_id FROM task_queue WHERE visible_from < ? ORDER BY task_id LIMIT ?)
		RETURNING task_id, execution_id, workflow_id, params, context`,
		now+int64(visibilityTimeout), now, limit)
	if err != nil {
		return nil, err
	}
	return scanClaimed(rows)
}

// completeTx records each result as the $$workflow-result$$ step and
// deletes the task.
func (y *Yieldstar) completeTx(ctx context.Context, tx *sql.Tx, _ int64, rows []claimed) error {
	ins, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO step_responses (execution_id, step_key, step_attempt, step_done, step_response) VALUES (?, '$$workflow-result$$', 0, 1, 'null')`)
	if err != nil {
		return err
	}
	defer ins.Close()
	del, err := tx.PrepareContext(ctx, `DELETE FROM task_queue WHERE task_id = ?`)
	if err != nil {
		return err
	}
	defer del.Close()
	for _, r := range rows {
		if _, err := ins.ExecContext(ctx, r.id); err != nil {
			return err
		}
		if _, err := del.ExecContext(ctx, r.key); err != nil {
			return err
		}
	}
	return nil
}
