package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/archive"
	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/untimed"
	"github.com/execstore/execstore/snapshot"
	"github.com/execstore/execstore/vfs"
	"github.com/execstore/execstore/wal"
)

const inspectUsage = `usage: execstore inspect <subcommand> [--data DIR] [--json] [flags]

Every subcommand works on a copy of the data directory, made in a temporary
directory and removed afterwards: the directory itself, even a live store's,
is only read.

subcommands:
  summary          counts by status, the due backlog, leases, queues, the log, snapshots (the default)
  get ID           a record with its steps, watches and children
  list             a page of executions (--status, --workflow, --parent, --order, --limit, --cursor)
  wal dump         every logged command with its index and time (--execution ID to filter)
  verify           every checksum of every kept snapshot and log entry, the recovered
                   state's invariants and the fallback path; exit status 1 on any problem
`

// inspect runs an inspect subcommand. "inspect --data DIR" with no
// subcommand is "inspect summary".
func inspect(args []string, stdout, stderr io.Writer) error {
	sub := "summary"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	if sub == "wal" {
		if len(args) == 0 || args[0] != "dump" {
			fmt.Fprint(stderr, inspectUsage)
			return errors.New(`inspect wal: the subcommand is "wal dump"`)
		}
		sub, args = "wal dump", args[1:]
	}
	fs := flag.NewFlagSet("inspect "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, inspectUsage); fs.PrintDefaults() }
	in := &inspector{stdout: stdout, stderr: stderr}
	fs.StringVar(&in.data, "data", "./execstore-data", "the store's data directory (only read)")
	fs.BoolVar(&in.json, "json", false, "print JSON instead of aligned text")
	var q execstore.ListQuery
	var execution string
	switch sub {
	case "list":
		fs.StringVar((*string)(&q.Status), "status", "", "only this status")
		fs.StringVar(&q.WorkflowID, "workflow", "", "only this workflow")
		fs.StringVar(&q.ParentID, "parent", "", "only the children of this execution")
		fs.StringVar((*string)(&q.Order), "order", "oldest", "oldest or newest first")
		fs.IntVar(&q.Limit, "limit", 100, "the most records")
		fs.StringVar(&q.Cursor, "cursor", "", "the cursor a previous page printed")
	case "wal dump":
		fs.StringVar(&execution, "execution", "", "only the commands that name this execution")
	case "summary", "get", "verify":
	default:
		fmt.Fprint(stderr, inspectUsage)
		return fmt.Errorf("inspect: unknown subcommand %q", sub)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if sub == "get" && fs.NArg() != 1 {
		return errors.New("inspect get: give one execution ID")
	}
	if _, err := os.Stat(in.data); err != nil {
		return err
	}
	copyDir, err := copyDataDir(in.data)
	if err != nil {
		return err
	}
	defer os.RemoveAll(copyDir)
	in.copy = copyDir
	switch sub {
	case "summary":
		return in.summary()
	case "get":
		return in.get(fs.Arg(0))
	case "list":
		return in.list(q)
	case "wal dump":
		return in.walDump(execution)
	}
	return in.verify()
}

type inspector struct {
	data, copy     string
	json           bool
	stdout, stderr io.Writer
}

// copyDataDir copies the store's files (the log, the snapshots, side files)
// into a new temporary directory and returns it. A live store may write
// meanwhile: the copy is then what a crash at some instant would leave, and
// opening it repairs it, as recovery would.
func copyDataDir(src string) (string, error) {
	dst, err := os.MkdirTemp("", "execstore-inspect-")
	if err != nil {
		return "", err
	}
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o750)
		case !d.Type().IsRegular() || rel == "LOCK":
			return nil
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile (compaction, pruning)
		}
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o640)
	})
	if err != nil {
		os.RemoveAll(dst)
		return "", fmt.Errorf("inspect: copying %s: %w", src, err)
	}
	return dst, nil
}

// open opens the copy as a store; logs go to stderr at warning level. Its
// clock's timers never fire: the copy retires nothing and admits no
// occurrence of its own while it is being read.
func (in *inspector) open() (*execstore.Store, error) {
	logger := slog.New(slog.NewTextHandler(in.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return execstore.Open(in.copy, execstore.Options{NoSync: true, Logger: logger, Clock: untimed.Clock(time.Now)})
}

func (in *inspector) printJSON(v any) error {
	enc := json.NewEncoder(in.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// ---- summary -------------------------------------------------------------------

type snapshotSummary struct {
	File  string    `json:"file"`
	Index uint64    `json:"index"`
	Bytes int64     `json:"bytes"`
	Time  time.Time `json:"time"`
	AgeMs int64     `json:"ageMs"`
}

type summaryJSON struct {
	Data         string `json:"data"`
	Executions   int    `json:"executions"`
	Terminal     int    `json:"terminal"`
	Retired      int    `json:"retired"`
	Archived     int    `json:"archived"`
	ArchiveBytes uint64 `json:"archiveBytes"`
	// ArchiveBytesPerExecution is ArchiveBytes over Archived (0 with none).
	ArchiveBytesPerExecution float64                  `json:"archiveBytesPerExecution"`
	ForgottenBefore          *time.Time               `json:"forgottenBefore,omitempty"`
	Pending                  int                      `json:"pending"`
	ByStatus                 map[execstore.Status]int `json:"byStatus"`
	ByWorkflow               map[string]int           `json:"byWorkflow"`
	Now                      time.Time                `json:"now"`
	NextDue                  *time.Time               `json:"nextDue,omitempty"`
	OldestDueMs              int64                    `json:"oldestDueMs"`
	Waiting                  int                      `json:"waiting"`
	DueNow                   int                      `json:"dueNow"`
	Upcoming                 []upcomingJSON           `json:"upcoming"`
	Leases                   int                      `json:"leases"`
	LeasesExpired            int                      `json:"leasesExpired"`
	Schedules                int                      `json:"schedules"`
	// Queues: the first execstore.GaugesQueues queues with settings or live
	// executions, in name order, as GET /v1/queues/{name} answers each;
	// QueuesOmitted counts the rest.
	Queues        []queueJSON       `json:"queues"`
	QueuesOmitted int               `json:"queuesOmitted"`
	WALFirstIndex uint64            `json:"walFirstIndex"`
	WALLastIndex  uint64            `json:"walLastIndex"`
	WALSegments   int               `json:"walSegments"`
	WALBytes      int64             `json:"walBytes"`
	Snapshots     []snapshotSummary `json:"snapshots"`
}

// upcomingJSON is one of the next claimable executions.
type upcomingJSON struct {
	ExecutionID string    `json:"executionId"`
	At          time.Time `json:"at"`
	Leased      bool      `json:"leased"`
}

func (in *inspector) summary() error {
	store, err := in.open()
	if err != nil {
		return err
	}
	defer store.Close()
	g, err := store.Gauges(context.Background())
	if err != nil {
		return err
	}
	out := summaryJSON{
		Data: in.data, Executions: g.Executions, Terminal: g.Terminal, Retired: g.Retired, Pending: g.Pending,
		Archived: g.Archived, ArchiveBytes: g.ArchiveBytes,
		ByStatus: g.ByStatus, ByWorkflow: g.ByWorkflow, Now: g.Now, OldestDueMs: g.OldestDueAge.Milliseconds(),
		Waiting: g.Waiting, DueNow: g.DueNow, Leases: g.Leases, LeasesExpired: g.LeasesExpired, Schedules: g.Schedules,
		Upcoming: []upcomingJSON{}, Queues: []queueJSON{}, QueuesOmitted: g.QueuesOmitted,
		WALFirstIndex: g.WALFirstIndex, WALLastIndex: g.WALLastIndex, WALSegments: g.WALSegments, WALBytes: g.WALBytes,
		Snapshots: []snapshotSummary{},
	}
	if !g.NextDue.IsZero() {
		out.NextDue = &g.NextDue
	}
	if g.Archived > 0 {
		out.ArchiveBytesPerExecution = float64(g.ArchiveBytes) / float64(g.Archived)
	}
	if !g.ForgottenBefore.IsZero() {
		out.ForgottenBefore = &g.ForgottenBefore
	}
	for _, u := range g.Upcoming {
		out.Upcoming = append(out.Upcoming, upcomingJSON{ExecutionID: u.ExecutionID, At: u.At, Leased: u.Leased})
	}
	for _, q := range g.Queues {
		out.Queues = append(out.Queues, queueOut(q))
	}
	snaps, err := snapshot.List(vfs.Default, filepath.Join(in.data, "snapshots"))
	if err != nil {
		return err
	}
	for _, s := range snaps {
		ss := snapshotSummary{File: filepath.Base(s.Path), Index: s.Index}
		if fi, err := os.Stat(s.Path); err == nil {
			ss.Bytes, ss.Time, ss.AgeMs = fi.Size(), fi.ModTime().UTC(), time.Since(fi.ModTime()).Milliseconds()
		}
		out.Snapshots = append(out.Snapshots, ss)
	}
	if in.json {
		return in.printJSON(out)
	}
	w := tabwriter.NewWriter(in.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "data:\t%s\n", in.data)
	fmt.Fprintf(w, "executions:\t%d (%d terminal, %d retired, %d pending)\n", g.Executions, g.Terminal, g.Retired, g.Pending)
	if g.Archived > 0 || g.ArchiveBytes > 0 {
		fmt.Fprintf(w, "archive:\t%d executions, %d bytes on disk (%.1f per execution)\n", g.Archived, g.ArchiveBytes, out.ArchiveBytesPerExecution)
	}
	if !g.ForgottenBefore.IsZero() {
		fmt.Fprintf(w, "forgotten:\tthe archived executions that ended before %s\n", g.ForgottenBefore.Format(time.RFC3339Nano))
	}
	for _, st := range uiStatuses {
		fmt.Fprintf(w, "  %s\t%d\n", st, g.ByStatus[st])
	}
	fmt.Fprintf(w, "store time:\t%s\n", g.Now.Format(time.RFC3339Nano))
	if !g.NextDue.IsZero() {
		fmt.Fprintf(w, "next due:\t%s\n", g.NextDue.Format(time.RFC3339Nano))
	}
	fmt.Fprintf(w, "due backlog:\t%d due now, oldest due for %v; %d waiting for a wake\n", g.DueNow, g.OldestDueAge, g.Waiting)
	for _, u := range g.Upcoming {
		what := "due"
		if u.Leased {
			what = "lease expires"
		}
		fmt.Fprintf(w, "  %s\t%s %s\n", u.ExecutionID, what, u.At.Format(time.RFC3339Nano))
	}
	fmt.Fprintf(w, "leases:\t%d (%d expired)\n", g.Leases, g.LeasesExpired)
	fmt.Fprintf(w, "schedules:\t%d\n", g.Schedules)
	fmt.Fprintf(w, "queues:\t%d with settings or live executions\n", len(g.Queues)+g.QueuesOmitted)
	for _, q := range g.Queues {
		fmt.Fprintf(w, "  %s\t%s\n", q.Name, queueLine(q))
	}
	if g.QueuesOmitted > 0 {
		fmt.Fprintf(w, "  …\t%d more (inspect --json lists the first %d as well)\n", g.QueuesOmitted, execstore.GaugesQueues)
	}
	fmt.Fprintf(w, "wal:\tentries %d to %d, %d segment(s), %s\n", g.WALFirstIndex, g.WALLastIndex, g.WALSegments, bytesText(g.WALBytes))
	for _, s := range out.Snapshots {
		fmt.Fprintf(w, "snapshot:\t%s (index %d, %s, written %s, %v ago)\n", s.File, s.Index, bytesText(s.Bytes),
			s.Time.Format(time.RFC3339), (time.Duration(s.AgeMs) * time.Millisecond).Round(time.Second))
	}
	if len(out.Snapshots) == 0 {
		fmt.Fprintf(w, "snapshot:\tnone\n")
	}
	return w.Flush()
}

// queueLine is a queue's counts and settings on one line.
func queueLine(q execstore.QueueInfo) string {
	line := fmt.Sprintf("%d live, %d due, %d leased (%d expired)", q.Live, q.Due, q.Leased, q.Expired)
	if q.Concurrency > 0 {
		line += fmt.Sprintf("; concurrency %d", q.Concurrency)
	}
	if q.Rate > 0 {
		line += fmt.Sprintf("; rate %d per %v, %d granted in the window", q.Rate, q.RatePeriod, q.Granted)
	}
	if q.KeyLimit > 0 {
		line += fmt.Sprintf("; %d per concurrency key (%s), %d parked", q.KeyLimit, q.KeyMode, q.Parked)
	}
	if q.Paused {
		line += "; paused"
	}
	return line
}

// ---- get and list ----------------------------------------------------------------

type stepJSON struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

type getJSON struct {
	Record    recordJSON   `json:"record"`
	Steps     []stepJSON   `json:"steps"`
	StepCount int          `json:"stepCount"`
	Watches   [][]string   `json:"watches"`
	Children  []recordJSON `json:"children"`
}

// inspectStepsMax bounds the steps and children get prints.
const inspectStepsMax = 10_000

func (in *inspector) get(id string) error {
	store, err := in.open()
	if err != nil {
		return err
	}
	defer store.Close()
	ctx := context.Background()
	rec, err := store.Get(ctx, id)
	if err != nil {
		return err
	}
	det, err := store.Detail(ctx, id, inspectStepsMax)
	if err != nil {
		return err
	}
	children, err := store.List(ctx, execstore.ListQuery{ParentID: id, Limit: 1000})
	if err != nil {
		return err
	}
	out := getJSON{Record: recordOut(rec), StepCount: det.StepCount, Watches: det.Watches, Steps: []stepJSON{}, Children: []recordJSON{}}
	if out.Watches == nil {
		out.Watches = [][]string{}
	}
	for _, s := range det.Steps {
		out.Steps = append(out.Steps, stepJSON{Key: s.Key, Value: s.Value})
	}
	for _, c := range children.Records {
		out.Children = append(out.Children, recordOut(c))
	}
	if in.json {
		return in.printJSON(out)
	}
	w := tabwriter.NewWriter(in.stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, v) }
	row("execution", rec.ExecutionID)
	row("workflow", rec.WorkflowID)
	row("status", string(rec.Status))
	row("admitted", rec.AdmittedAt.Format(time.RFC3339Nano))
	row("updated", rec.UpdatedAt.Format(time.RFC3339Nano))
	if !rec.DueAt.IsZero() {
		row("due", rec.DueAt.Format(time.RFC3339Nano))
	}
	row("attempts", fmt.Sprintf("%d (max %d; 0: no bound)", rec.Attempts, rec.MaxAttempts))
	if p := rec.Parent; p != nil {
		row("parent", fmt.Sprintf("%s (step %q)", p.ExecutionID, p.StepKey))
	}
	if l := rec.Lease; l != nil {
		row("lease", fmt.Sprintf("token %d, expires %s", l.Token, l.ExpiresAt.Format(time.RFC3339Nano)))
	}
	if rec.Params != nil {
		row("params", string(rec.Params))
	}
	keys := make([]string, 0, len(rec.Context))
	for k := range rec.Context {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		row("context "+k, rec.Context[k])
	}
	if o := rec.Outcome; o != nil {
		row("outcome", string(o.Status))
		if o.Result != nil {
			row("result", string(o.Result))
		}
		for i, e := 0, o.Error; e != nil; i, e = i+1, e.Cause {
			label := "error"
			if i > 0 {
				label = strings.Repeat("  ", i) + "caused by"
			}
			code := ""
			if e.Code != "" {
				code = " [" + e.Code + "]"
			}
			row(label, fmt.Sprintf("%s%s: %s", e.Name, code, e.Message))
		}
	}
	row("steps", fmt.Sprint(det.StepCount))
	for _, s := range det.Steps {
		row("  "+s.Key, string(s.Value))
	}
	for _, keys := range det.Watches {
		row("watch", strings.Join(keys, ", "))
	}
	for _, c := range children.Records {
		row("child", fmt.Sprintf("%s %s %s (step %q)", c.ExecutionID, c.WorkflowID, c.Status, c.Parent.StepKey))
	}
	return w.Flush()
}

func (in *inspector) list(q execstore.ListQuery) error {
	store, err := in.open()
	if err != nil {
		return err
	}
	defer store.Close()
	page, err := store.List(context.Background(), q)
	if err != nil {
		return err
	}
	if in.json {
		out := struct {
			Records []recordJSON `json:"records"`
			Cursor  string       `json:"cursor"`
		}{Records: []recordJSON{}, Cursor: page.Cursor}
		for _, r := range page.Records {
			out.Records = append(out.Records, recordOut(r))
		}
		return in.printJSON(out)
	}
	w := tabwriter.NewWriter(in.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "EXECUTION\tWORKFLOW\tSTATUS\tADMITTED\tUPDATED\tATTEMPTS\tOUTCOME")
	for _, r := range page.Records {
		outcome := ""
		if o := r.Outcome; o != nil && o.Error != nil {
			outcome = o.Error.Name + ": " + o.Error.Message
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.ExecutionID, r.WorkflowID, r.Status,
			r.AdmittedAt.Format(time.RFC3339), r.UpdatedAt.Format(time.RFC3339), r.Attempts, oneLine(outcome, 80))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if page.Cursor != "" {
		fmt.Fprintf(in.stdout, "more: --cursor %s\n", page.Cursor)
	}
	return nil
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n-1] + "…"
	}
	return s
}

// ---- wal dump ----------------------------------------------------------------------

// walDump prints every entry of the copy's log, decoded: one aligned line
// (index, time, kind, execution, the command's other fields) or one JSON
// object per line.
func (in *inspector) walDump(execution string) error {
	log, err := wal.Open(filepath.Join(in.copy, "wal"), wal.Options{NoSync: true, Logger: slog.New(slog.NewTextHandler(in.stderr, nil))})
	if err != nil {
		return err
	}
	defer log.Close()
	w := tabwriter.NewWriter(in.stdout, 0, 4, 2, ' ', 0)
	if !in.json {
		fmt.Fprintln(w, "INDEX\tTIME\tKIND\tEXECUTION\tFIELDS")
	}
	enc := json.NewEncoder(in.stdout)
	enc.SetEscapeHTML(false)
	var cmd fsm.Command
	err = log.Replay(log.FirstIndex(), func(index uint64, payload []byte) error {
		if err := fsm.DecodeInto(&cmd, payload); err != nil {
			return fmt.Errorf("entry %d: %w", index, err)
		}
		if execution != "" && !names(&cmd, execution) {
			return nil
		}
		fields := commandFields(&cmd)
		at := time.Unix(0, cmd.Now).UTC()
		if in.json {
			return enc.Encode(map[string]any{"index": index, "time": at, "kind": cmd.Kind.String(), "command": fields})
		}
		id := cmd.ExecutionID
		delete(fields, "ExecutionID")
		var b strings.Builder
		fe := json.NewEncoder(&b)
		fe.SetEscapeHTML(false)
		fe.Encode(fields)
		_, err := fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", index, at.Format(time.RFC3339Nano), cmd.Kind, id, strings.TrimSpace(b.String()))
		return err
	})
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}

// names says whether a command concerns an execution.
func names(c *fsm.Command, id string) bool {
	if c.ExecutionID == id || c.ChildID == id {
		return true
	}
	for _, a := range c.Acks {
		if a.ExecutionID == id {
			return true
		}
	}
	return false
}

// commandFields returns a command's fields that are not zero, by their Go
// names, for printing: the kind and time are printed apart.
func commandFields(c *fsm.Command) map[string]any {
	out := map[string]any{}
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Name == "Kind" || f.Name == "Now" || !f.IsExported() || v.Field(i).IsZero() {
			continue
		}
		out[f.Name] = v.Field(i).Interface()
	}
	return out
}

// ---- verify --------------------------------------------------------------------------

// verify reads every byte recovery could need and reports each problem; it
// returns an error (exit status 1) if there is any.
func (in *inspector) verify() error {
	var problems []string
	report := func(what string, err error) {
		status := "ok"
		if err != nil {
			status = "FAILED: " + err.Error()
			problems = append(problems, what+": "+err.Error())
		}
		fmt.Fprintf(in.stdout, "%-40s %s\n", what, status)
	}
	// Every kept snapshot, decoded whole (its checksum and every rule of the
	// state's encoding).
	snaps, err := snapshot.List(vfs.Default, filepath.Join(in.copy, "snapshots"))
	report("snapshot directory", err)
	for _, s := range snaps {
		_, _, err := snapshot.Read(vfs.Default, s.Path)
		report("snapshot "+filepath.Base(s.Path), err)
	}
	// Every log entry: its frame's checksum and its command's decoding. A
	// torn tail (a write in flight when a live store was copied) is cut, as
	// recovery would, and reported apart.
	var torn tornRecorder
	log, err := wal.Open(filepath.Join(in.copy, "wal"), wal.Options{NoSync: true, Logger: slog.New(&torn)})
	if err == nil {
		var cmd fsm.Command
		n := 0
		err = log.Replay(log.FirstIndex(), func(index uint64, payload []byte) error {
			n++
			if err := fsm.DecodeInto(&cmd, payload); err != nil {
				return fmt.Errorf("entry %d: %w", index, err)
			}
			return nil
		})
		if err == nil {
			fmt.Fprintf(in.stdout, "%-40s %d entries, %d to %d\n", "wal entries read", n, log.FirstIndex(), log.LastIndex())
		}
		log.Close()
	}
	report("wal", err)
	if msg := torn.message(); msg != "" {
		fmt.Fprintf(in.stdout, "%-40s %s\n", "wal tail", "cut a torn final write (expected when the store was running; a problem if it was stopped): "+msg)
	}
	// The store recovered from the copy: its indexes against its records,
	// and the background check of the fallback path (the older snapshot and
	// the log between the two).
	store, err := execstore.Open(in.copy, execstore.Options{NoSync: true, Clock: untimed.Clock(time.Now)})
	report("recovery", err)
	if err == nil {
		report("state invariants", store.CheckInvariants())
		report("fallback path", waitFallback(store))
		st, serr := store.Stats(context.Background())
		store.Close()
		// The archive, if there is one: every record decodes and has its
		// index entries, and it holds as many as the state counts.
		if dir := filepath.Join(in.copy, "archive"); serr == nil && dirExists(dir) {
			n, err := checkArchive(dir, st.ForgottenBefore)
			if err == nil && n != st.Archived {
				err = fmt.Errorf("%d archived executions, the state counts %d", n, st.Archived)
			}
			report("archive", err)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("verify: %d problem(s) in %s", len(problems), in.data)
	}
	return nil
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// checkArchive reads the whole archive in dir (archive.Archive.Check) and
// returns how many records it holds that ended at or after forgottenBefore
// (the store's forget cutoff; zero: every record).
func checkArchive(dir string, forgottenBefore time.Time) (int, error) {
	a, err := archive.Open(dir, archive.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return 0, err
	}
	var cutoff int64
	if !forgottenBefore.IsZero() {
		cutoff = forgottenBefore.UnixNano()
	}
	n, err := a.Check(cutoff)
	return n, errors.Join(err, a.Close())
}

// waitFallback waits for the store's check of its fallback recovery path and
// returns what it found.
func waitFallback(s *execstore.Store) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		st, err := s.Stats(context.Background())
		if err != nil {
			return err
		}
		if st.FallbackChecked {
			return st.FallbackErr
		}
		if time.Now().After(deadline) {
			return errors.New("the check did not finish in ten minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tornRecorder is a slog.Handler that keeps the log's report of a torn
// tail.
type tornRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (t *tornRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (t *tornRecorder) WithAttrs([]slog.Attr) slog.Handler       { return t }
func (t *tornRecorder) WithGroup(string) slog.Handler            { return t }

func (t *tornRecorder) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "torn") {
		return nil
	}
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	t.mu.Lock()
	t.lines = append(t.lines, b.String())
	t.mu.Unlock()
	return nil
}

func (t *tornRecorder) message() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "; ")
}
