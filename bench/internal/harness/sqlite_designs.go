package harness

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// visibilityTimeout is how long a claimed row stays invisible to other
// claims (the lease of the SQL designs).
const visibilityTimeout = 30 * time.Second

// claimed is one row a SQL design's claim returned.
type claimed struct {
	key   int64 // task_id for the task queue, token for the records
	id    string
	event [3]sql.NullString // workflow, params, context: what the worker reads
}

// sqlDesign is a hand-written SQLite design: a claim statement and a
// completion statement, with the worker loop they share.
type sqlDesign struct {
	sqliteDB
	claim    func(ctx context.Context, tx *sql.Tx, now int64, limit int) ([]claimed, error)
	complete func(ctx context.Context, tx *sql.Tx, now int64, rows []claimed) error
}

func (d *sqlDesign) Close() error { return d.close() }

func (d *sqlDesign) claimRows(ctx context.Context, limit int) ([]claimed, error) {
	var rows []claimed
	err := d.tx(ctx, func(tx *sql.Tx) error {
		var err error
		rows, err = d.claim(ctx, tx, time.Now().UnixNano(), limit)
		return err
	})
	return rows, err
}

func (d *sqlDesign) completeRows(ctx context.Context, rows []claimed) error {
	return d.tx(ctx, func(tx *sql.Tx) error { return d.complete(ctx, tx, time.Now().UnixNano(), rows) })
}

// ClaimComplete is one claim transaction and one completion transaction
// (two fsyncs), as a worker that claims a batch and completes it would do.
func (d *sqlDesign) ClaimComplete(ctx context.Context, limit int) (int, error) {
	rows, err := d.claimRows(ctx, limit)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	return len(rows), d.completeRows(ctx, rows)
}

// Chain is a claimer that completes the batch it ran and claims the next in
// one transaction (one fsync): the completion statements, then the claim.
func (d *sqlDesign) Chain() ClaimChain { return &sqlChain{d: d} }

type sqlChain struct {
	d    *sqlDesign
	rows []claimed // claimed, not yet completed
}

func (c *sqlChain) Next(ctx context.Context, limit int) (int, int, error) {
	var rows []claimed
	done := len(c.rows)
	err := c.d.tx(ctx, func(tx *sql.Tx) error {
		now := time.Now().UnixNano()
		if done > 0 {
			if err := c.d.complete(ctx, tx, now, c.rows); err != nil {
				return err
			}
		}
		var err error
		rows, err = c.d.claim(ctx, tx, now, limit)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	c.rows = rows
	return done, len(rows), nil
}

func (c *sqlChain) Finish(ctx context.Context) (int, error) {
	if len(c.rows) == 0 {
		return 0, nil
	}
	if err := c.d.completeRows(ctx, c.rows); err != nil {
		return 0, err
	}
	n := len(c.rows)
	c.rows = nil
	return n, nil
}

func (d *sqlDesign) Size(context.Context) (int64, string, error) {
	n, err := d.fileSize()
	return n, "file", err
}

// Work is the designs' worker loop: claim up to conc due rows (one
// transaction), run the no-op body for each, complete them all (one
// transaction), and poll every millisecond while nothing is due. The bodies
// run on the loop's goroutine: they do nothing, and SQLite has one writer, so
// more goroutines would only queue for the connection.
func (d *sqlDesign) Work(ctx context.Context, conc int, onRun, onDone func(string)) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			rows, err := d.claimRows(ctx, conc)
			if err != nil || len(rows) == 0 {
				if err != nil && ctx.Err() == nil {
					panic(err)
				}
				sleepCtx(ctx, time.Millisecond)
				continue
			}
			for _, r := range rows {
				onRun(r.id)
			}
			if err := d.completeRows(ctx, rows); err != nil {
				if ctx.Err() != nil {
					return
				}
				panic(err)
			}
			for _, r := range rows {
				onDone(r.id)
			}
		}
	})
	return func() { cancel(); wg.Wait() }, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// scanClaimed reads a claim's RETURNING key, id, workflow_id, params,
// context: the worker gets the event with the claim.
func scanClaimed(rows *sql.Rows) ([]claimed, error) {
	defer rows.Close()
	var out []claimed
	for rows.Next() {
		var c claimed
		if err := rows.Scan(&c.key, &c.id, &c.event[0], &c.event[1], &c.event[2]); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
