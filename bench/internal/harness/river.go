package harness

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // River's SQLite driver is tested on this one
)

// benchArgs is a River job standing for one execution: its ID is the only
// argument (the event itself would be copied here too).
type benchArgs struct {
	ID string `json:"id"`
}

func (benchArgs) Kind() string { return "bench" }

// benchWorker is the no-op body; run is swapped in by Work.
type benchWorker struct {
	river.WorkerDefaults[benchArgs]
	run *atomic.Pointer[func(string)]
}

func (w *benchWorker) Work(_ context.Context, job *river.Job[benchArgs]) error {
	if f := w.run.Load(); f != nil {
		(*f)(job.Args.ID)
	}
	return nil
}

// River is River (github.com/riverqueue/river) on PostgreSQL or SQLite,
// through its public client for inserts and its worker loop, and through its
// driver's own claim (JobGetAvailable) and completion
// (JobSetStateIfRunningMany) statements, the ones its producer and batch
// completer run, for the claim-and-complete workload.
type River struct {
	// PostgresDSN selects PostgreSQL; empty selects SQLite.
	PostgresDSN string
	// Tuned lowers FetchCooldown to its minimum, polls every 10 ms and runs
	// as many workers as the workload's concurrency (at least 100);
	// otherwise River's defaults (FetchCooldown 100 ms, FetchPollInterval
	// 1 s) with 100 workers, the value River's examples use.
	Tuned bool
	// Unique inserts with UniqueOpts{ByArgs: true}, River's way to refuse a
	// repeated job.
	Unique bool

	pool   *pgxpool.Pool
	sqlDB  *sql.DB
	dir    string
	schema string
	run    atomic.Pointer[func(string)]
	insert func(ctx context.Context, params []river.InsertManyParams, fast bool) ([]bool, error)
	exec   riverdriver.Executor
	start  func(ctx context.Context, conc int) (stop func(), events <-chan *river.Event, err error)
}

var riverSchemas atomic.Int64

func (r *River) Name() string {
	db := "SQLite"
	if r.PostgresDSN != "" {
		db = "PostgreSQL"
	}
	switch {
	case r.Unique && r.Tuned:
		return "River on " + db + " (tuned, unique by args)"
	case r.Unique:
		return "River on " + db + " (unique by args)"
	case r.Tuned:
		return "River on " + db + " (tuned)"
	}
	return "River on " + db
}

func (r *River) Open(ctx context.Context, dir string) error {
	r.dir = dir
	if r.PostgresDSN != "" {
		return r.openPostgres(ctx)
	}
	return r.openSQLite(ctx)
}

func (r *River) openPostgres(ctx context.Context) error {
	cfg, err := pgxpool.ParseConfig(r.PostgresDSN)
	if err != nil {
		return err
	}
	cfg.MaxConns = 40
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	r.pool = pool
	r.schema = fmt.Sprintf("bench_%d", riverSchemas.Add(1))
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{r.schema}.Sanitize()); err != nil {
		return err
	}
	return setupRiver(ctx, r, riverpgxv5.New(pool))
}

// riverSQLiteDSN: WAL mode, synchronous=FULL, the same page cache as the
// hand-written designs, one connection (as River's SQLite driver advises).
func riverSQLiteDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)" +
		"&_pragma=cache_size(-131072)&_txlock=immediate"
}

func (r *River) openSQLite(ctx context.Context) error {
	db, err := sql.Open("sqlite", riverSQLiteDSN(filepath.Join(r.dir, "river.db")))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	r.sqlDB = db
	return setupRiver(ctx, r, riversqlite.New(db))
}

func setupRiver[TTx any](ctx context.Context, r *River, driver riverdriver.Driver[TTx]) error {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: r.schema, Logger: quiet})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}
	r.exec = driver.GetExecutor()
	inserter, err := river.NewClient(driver, &river.Config{Schema: r.schema, Logger: quiet})
	if err != nil {
		return err
	}
	r.insert = func(ctx context.Context, params []river.InsertManyParams, fast bool) ([]bool, error) {
		if fast {
			_, err := inserter.InsertManyFast(ctx, params)
			return nil, err
		}
		res, err := inserter.InsertMany(ctx, params)
		dups := make([]bool, len(res))
		for i, x := range res {
			dups[i] = x.UniqueSkippedAsDuplicate
		}
		return dups, err
	}
	r.start = func(ctx context.Context, conc int) (func(), <-chan *river.Event, error) {
		return startRiverClient(ctx, r, driver, conc, quiet)
	}
	return nil
}

func (r *River) clientConfig(conc int, logger *slog.Logger) *river.Config {
	workers := river.NewWorkers()
	river.AddWorker(workers, &benchWorker{run: &r.run})
	cfg := &river.Config{Schema: r.schema, Logger: logger, Workers: workers,
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}}}
	if r.Tuned {
		cfg.FetchCooldown = river.FetchCooldownMin
		cfg.FetchPollInterval = 10 * time.Millisecond
		cfg.Queues[river.QueueDefault] = river.QueueConfig{MaxWorkers: max(conc, 100)}
	}
	return cfg
}

func startRiverClient[TTx any](ctx context.Context, r *River, driver riverdriver.Driver[TTx], conc int, logger *slog.Logger) (func(), <-chan *river.Event, error) {
	c, err := river.NewClient(driver, r.clientConfig(conc, logger))
	if err != nil {
		return nil, nil, err
	}
	events, cancelSub := c.SubscribeConfig(&river.SubscribeConfig{ChanSize: 1 << 20, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	if err := c.Start(ctx); err != nil {
		cancelSub()
		return nil, nil, err
	}
	return func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Stop(stopCtx)
		cancelSub()
	}, events, nil
}

func (r *River) Close() error {
	if r.pool != nil {
		_, _ = r.pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{r.schema}.Sanitize()+" CASCADE")
		r.pool.Close()
		r.pool = nil
	}
	if r.sqlDB != nil {
		err := r.sqlDB.Close()
		r.sqlDB = nil
		return err
	}
	return nil
}

func (r *River) opts() *river.InsertOpts {
	if r.Unique {
		return &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
	}
	return nil
}

func (r *River) Admit(ctx context.Context, id string) (bool, error) {
	dups, err := r.insert(ctx, []river.InsertManyParams{{Args: benchArgs{ID: id}, InsertOpts: r.opts()}}, false)
	return len(dups) == 1 && dups[0], err
}

// AdmitBatch is River's InsertMany.
func (r *River) AdmitBatch(ctx context.Context, ids []string) (int, error) {
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		params[i] = river.InsertManyParams{Args: benchArgs{ID: id}, InsertOpts: r.opts()}
	}
	dups, err := r.insert(ctx, params, false)
	n := 0
	for _, d := range dups {
		if d {
			n++
		}
	}
	return n, err
}

// Fill is River's InsertManyFast (COPY FROM on PostgreSQL) in chunks.
func (r *River) Fill(ctx context.Context, prefix string, from, n int) error {
	const chunk = 10_000
	for start := 0; start < n; start += chunk {
		params := make([]river.InsertManyParams, 0, chunk)
		for i := start; i < min(n, start+chunk); i++ {
			params = append(params, river.InsertManyParams{Args: benchArgs{ID: id(prefix, from+i)}})
		}
		if _, err := r.insert(ctx, params, true); err != nil {
			return err
		}
	}
	return nil
}

// ClaimComplete runs the statements River's producer and batch completer run:
// JobGetAvailable locks up to limit available jobs and marks them running,
// JobSetStateIfRunningMany marks them completed.
func (r *River) ClaimComplete(ctx context.Context, limit int) (int, error) {
	res, err := r.exec.JobGetAvailable(ctx, &riverdriver.JobGetAvailableParams{
		ClientID: "bench", MaxAttemptedBy: 100, MaxToLock: limit, Queue: river.QueueDefault, Schema: r.schema,
	})
	if err != nil || len(res.Jobs) == 0 {
		return 0, err
	}
	now := time.Now().UTC()
	p := &riverdriver.JobSetStateIfRunningManyParams{Schema: r.schema}
	for _, j := range res.Jobs {
		s := riverdriver.JobSetStateCompleted(j.ID, now, nil)
		p.ID = append(p.ID, s.ID)
		p.Attempt = append(p.Attempt, s.Attempt)
		p.ErrData = append(p.ErrData, s.ErrData)
		p.FinalizedAt = append(p.FinalizedAt, s.FinalizedAt)
		p.MetadataDoMerge = append(p.MetadataDoMerge, s.MetadataDoMerge)
		p.MetadataUpdates = append(p.MetadataUpdates, s.MetadataUpdates)
		p.ScheduledAt = append(p.ScheduledAt, s.ScheduledAt)
		p.State = append(p.State, s.State)
	}
	rows, err := r.exec.JobSetStateIfRunningMany(ctx, p)
	return len(rows), err
}

// Work starts a River client working the default queue; completions are
// reported from its subscription to completed-job events, which River sends
// once the completer has committed them.
func (r *River) Work(ctx context.Context, conc int, onRun, onDone func(string)) (func(), error) {
	r.run.Store(&onRun)
	stop, events, err := r.start(ctx, conc)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range events {
			var a benchArgs
			if err := json.Unmarshal(ev.Job.EncodedArgs, &a); err == nil {
				onDone(a.ID)
			}
		}
	})
	return func() {
		stop()
		wg.Wait()
		r.run.Store(nil)
	}, nil
}

// Size is the river_job table with its indexes (PostgreSQL) or the database
// files (SQLite).
func (r *River) Size(ctx context.Context) (int64, string, error) {
	if r.pool != nil {
		var n int64
		err := r.pool.QueryRow(ctx, "SELECT pg_total_relation_size($1)", r.schema+".river_job").Scan(&n)
		return n, "relation", err
	}
	s := sqliteDB{dir: r.dir}
	n, err := s.fileSize()
	return n, "file", err
}
