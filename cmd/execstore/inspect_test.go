package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

// dirDigest is every file's path, size, time and content hash under dir.
func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v %d %d", path, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if d.Type().IsRegular() {
			c, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(c))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// inspectStore is a live store (still open) with a snapshot behind it and
// log entries after it: a failed execution with a chain of causes, a
// suspended one with a step, a watch and a child, and a queued one of the
// first priority in a paused queue with limits.
func inspectStore(t *testing.T) (string, *execstore.Store) {
	t.Helper()
	dir := t.TempDir()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, err := execstore.Open(dir, execstore.Options{NoSync: true, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	seedUI(t, store)
	if err := store.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "queued", WorkflowID: "w", Priority: execstore.PriorityFirst}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.PutQueue(ctx, execstore.QueueSettings{Name: "w", Concurrency: 3, Rate: 10, RatePeriod: time.Minute, Paused: true, KeyLimit: 2}); err != nil {
		t.Fatal(err)
	}
	return dir, store
}

// Every inspect subcommand reads a copy: the data directory of a live store
// is byte for byte, and time for time, what it was.
func TestInspectSubcommandsLeaveTheDataDirectoryUnchanged(t *testing.T) {
	dir, _ := inspectStore(t)
	before := dirDigest(t, dir)
	for _, args := range [][]string{
		{"summary"}, {"summary", "--json"}, {"get", "queued"}, {"get", "--json", "queued"},
		{"list"}, {"list", "--json", "--status", "failed"}, {"wal", "dump"}, {"wal", "dump", "--json", "--execution", "queued"},
		{"verify"},
	} {
		var out, errOut bytes.Buffer
		args := append(args, "--data", dir)
		if args[0] == "get" { // the ID is the last argument
			args = append(append([]string{}, args[:len(args)-3]...), "--data", dir, args[len(args)-3])
		}
		if err := run(append([]string{"inspect"}, args...), &out, &errOut); err != nil {
			t.Fatalf("inspect %v: %v\n%s", args, err, errOut.String())
		}
		if out.Len() == 0 {
			t.Errorf("inspect %v printed nothing", args)
		}
	}
	if after := dirDigest(t, dir); after != before {
		t.Fatalf("inspect changed the data directory:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// summary, get, list and wal dump print aligned text for people and JSON
// with --json.
func TestInspectPrintsTextAndJSON(t *testing.T) {
	dir, store := inspectStore(t)
	inspectOut := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(append([]string{"inspect"}, args...), &out, &errOut); err != nil {
			t.Fatalf("inspect %v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	text := inspectOut("summary", "--data", dir)
	for _, want := range []string{"executions:", "4 (1 terminal, 0 retired, 2 pending)", "failed", "leases:", "due backlog:", "snapshot-0000",
		"queues:", "  w ", "1 live, 1 due, 0 leased (0 expired); concurrency 3; rate 10 per 1m0s, 0 granted in the window; 2 per concurrency key (leased), 0 parked; paused"} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q:\n%s", want, text)
		}
	}
	var sum summaryJSON
	if err := json.Unmarshal([]byte(inspectOut("summary", "--json", "--data", dir)), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Executions != 4 || sum.ByStatus[execstore.StatusFailed] != 1 || len(sum.Snapshots) != 1 || sum.WALSegments == 0 {
		t.Errorf("summary --json: %+v", sum)
	}
	if i := slices.IndexFunc(sum.Queues, func(q queueJSON) bool { return q.Name == "w" }); i < 0 ||
		sum.Queues[i] != (queueJSON{Name: "w", Concurrency: 3, Paused: true, Rate: 10, RatePeriodMs: 60000, Live: 1, Due: 1, KeyLimit: 2, KeyMode: execstore.KeyLeased}) {
		t.Errorf("summary --json queues: %+v", sum.Queues)
	}
	if g := inspectOut("get", "--json", "--data", dir, "queued"); !strings.Contains(g, `"priority": 1`) {
		t.Errorf("get --json of an execution of priority 1:\n%s", g)
	}

	page, err := store.List(ctx, execstore.ListQuery{Status: execstore.StatusFailed})
	if err != nil || len(page.Records) != 1 {
		t.Fatal(page, err)
	}
	failed := page.Records[0].ExecutionID
	get := inspectOut("get", "--data", dir, failed)
	for _, want := range []string{"status:", "failed", "caused by", "gateway said", "steps:"} {
		if !strings.Contains(get, want) {
			t.Errorf("get lacks %q:\n%s", want, get)
		}
	}
	var g getJSON
	if err := json.Unmarshal([]byte(inspectOut("get", "--json", "--data", dir, failed)), &g); err != nil {
		t.Fatal(err)
	}
	if g.Record.Outcome == nil || g.Record.Outcome.Error == nil || g.Record.Outcome.Error.Cause == nil || g.StepCount != 1 {
		t.Errorf("get --json: %+v", g)
	}

	list := inspectOut("list", "--data", dir, "--status", "failed")
	if lines := strings.Split(strings.TrimSpace(list), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "EXECUTION") {
		t.Errorf("list --status failed:\n%s", list)
	}

	dump := inspectOut("wal", "dump", "--json", "--data", dir, "--execution", "queued")
	lines := strings.Split(strings.TrimSpace(dump), "\n")
	var entry struct {
		Index   uint64
		Kind    string
		Command map[string]any
	}
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &entry) != nil || entry.Kind != "admit" || entry.Command["ExecutionID"] != "queued" {
		t.Errorf("wal dump --execution queued:\n%s", dump)
	}
	all := inspectOut("wal", "dump", "--data", dir)
	if !strings.HasPrefix(all, "INDEX") || !strings.Contains(all, "acknowledge") || !strings.Contains(all, "claim") {
		t.Errorf("wal dump:\n%s", all)
	}
}

// verify reads every kept snapshot and log entry: a damaged one makes it
// fail (exit status 1) and say where.
func TestInspectVerifyFailsOnADamagedSnapshotOrLogEntry(t *testing.T) {
	damage := func(t *testing.T, path string, at func(size int64) int64) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[at(int64(len(b)))] ^= 0xff
		if err := os.WriteFile(path, b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, want string
		damage     func(t *testing.T, dir string)
	}{
		{"nothing", "", func(*testing.T, string) {}},
		{"snapshot", "snapshot snapshot-", func(t *testing.T, dir string) {
			snaps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*.snap"))
			damage(t, snaps[0], func(n int64) int64 { return n / 2 })
		}},
		{"log entry", "wal", func(t *testing.T, dir string) {
			segs, _ := filepath.Glob(filepath.Join(dir, "wal", "0*"))
			damage(t, segs[0], func(n int64) int64 { return 40 })
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, store := inspectStore(t)
			store.Close()
			c.damage(t, dir)
			var out, errOut bytes.Buffer
			err := run([]string{"inspect", "verify", "--data", dir}, &out, &errOut)
			if c.want == "" {
				if err != nil || strings.Contains(out.String(), "FAILED") {
					t.Fatalf("verify of a sound store: %v\n%s", err, out.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "problem") {
				t.Fatalf("verify after damaging the %s: %v\n%s", c.name, err, out.String())
			}
			var failedLine string
			for _, l := range strings.Split(out.String(), "\n") {
				if strings.Contains(l, "FAILED") {
					failedLine = l
					break
				}
			}
			if !strings.HasPrefix(failedLine, c.want) {
				t.Errorf("first failed check %q, want one about %q:\n%s", failedLine, c.want, out.String())
			}
		})
	}
	var out, errOut bytes.Buffer
	if err := run([]string{"inspect", "nonsense", "--data", t.TempDir()}, &out, &errOut); err == nil {
		t.Error("an unknown subcommand was taken")
	}
	if err := run([]string{"inspect", "summary", "--data", filepath.Join(t.TempDir(), "missing")}, &out, &errOut); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("inspect of a missing directory: %v", err)
	}
}

func TestInspectPrintsTheStoreAndChecksIt(t *testing.T) {
	dir := t.TempDir()
	store, err := execstore.Open(dir, execstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	store.Admit(context.Background(), execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	store.Snapshot(context.Background())
	store.Close()
	var out, errOut bytes.Buffer
	if err := run([]string{"inspect", "--data", dir}, &out, &errOut); err != nil {
		t.Fatalf("inspect: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{"1 (0 terminal, 0 retired, 1 pending)", "entries 1 to 1", "snapshot-00000000000000000001.snap (index 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err := run([]string{"inspect", "--data", dir + "/missing"}, &out, &errOut); err == nil {
		t.Error("inspect of a missing directory succeeded")
	}
}

// inspect reads a store with an archive: summary counts the archived
// executions, get finds one in the archive, and verify reads the archive
// whole and finds its damage.
func TestInspectReadsAndChecksTheArchive(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	opts := execstore.Options{NoSync: true, Retention: time.Hour, Archive: true, Now: func() time.Time { return now }}
	store, err := execstore.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 300 {
		store.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprintf("order-%d", i), WorkflowID: "w"})
	}
	for {
		leases, err := store.ClaimDue(ctx, 100, time.Minute)
		if err != nil || len(leases) == 0 {
			break
		}
		for _, l := range leases {
			store.Acknowledge(ctx, l, execstore.Completed(nil))
		}
	}
	now = now.Add(2 * time.Hour)
	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "live", WorkflowID: "w"}) // retires the 300 first
	if err := store.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	store.Close()
	var out, errOut bytes.Buffer
	if err := run([]string{"inspect", "--data", dir}, &out, &errOut); err != nil || !strings.Contains(out.String(), "archive:") || !strings.Contains(out.String(), "300 executions") {
		t.Fatalf("inspect summary: %v\n%s%s", err, out.String(), errOut.String())
	}
	out.Reset()
	if err := run([]string{"inspect", "get", "--data", dir, "--json", "order-7"}, &out, &errOut); err != nil || !strings.Contains(out.String(), `"archived": true`) {
		t.Fatalf("inspect get of an archived execution: %v\n%s%s", err, out.String(), errOut.String())
	}
	out.Reset()
	if err := run([]string{"inspect", "verify", "--data", dir}, &out, &errOut); err != nil || !regexp.MustCompile(`(?m)^archive +ok$`).MatchString(out.String()) {
		t.Fatalf("inspect verify: %v\n%s%s", err, out.String(), errOut.String())
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "archive", "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no archive tables")
	}
	b, err := os.ReadFile(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(b)/2; i += 64 {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(tables[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run([]string{"inspect", "verify", "--data", dir}, &out, &errOut); err == nil {
		t.Fatalf("inspect verify of a damaged archive passed:\n%s", out.String())
	}

	// Served: a read that meets the damage answers 500, never 404, and
	// /healthz says the store is degraded, and why.
	store, err = execstore.Open(dir, opts)
	if err != nil {
		t.Logf("found at open: %v", err)
		return
	}
	defer store.Close()
	ts := httptest.NewServer(newAPI(store, slog.New(slog.DiscardHandler)))
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/v1/executions/order-7")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("GET of an execution in a damaged archive: %d, want 500", resp.StatusCode)
	}
	resp, err = http.Get(ts.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var health map[string]string
	json.NewDecoder(resp.Body).Decode(&health)
	resp.Body.Close()
	if health["status"] != "degraded" || health["archive"] == "" {
		t.Fatalf("/healthz after a failed read of the archive: %v", health)
	}
}

// A store that forgot archived executions: summary says so and counts only
// those it has not forgotten, and verify matches the archive's records
// against that count, though the forgotten ones are still on disk.
func TestInspectCountsTheArchivedExecutionsNotForgotten(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	opts := execstore.Options{NoSync: true, Retention: time.Hour, Archive: true, ForgetAfter: 3 * time.Hour,
		Now: func() time.Time { return now }}
	store, err := execstore.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	complete := func(prefix string, n int) {
		for i := range n {
			if _, err := store.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprintf("%s-%d", prefix, i), WorkflowID: "w"}); err != nil {
				t.Fatal(err)
			}
		}
		leases, err := store.ClaimDue(ctx, n, time.Minute)
		if err != nil || len(leases) != n {
			t.Fatalf("claimed %d of %d: %v", len(leases), n, err)
		}
		for _, l := range leases {
			if _, err := store.Acknowledge(ctx, l, execstore.Completed(nil)); err != nil {
				t.Fatal(err)
			}
		}
	}
	complete("old", 200)
	now = now.Add(2 * time.Hour)
	complete("new", 50)
	now = now.Add(2 * time.Hour)                                                   // "old" ended 4 hours ago, "new" 2
	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "live", WorkflowID: "w"}) // retires the 250, forgets the 200
	if err := store.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	store.Close()
	var out, errOut bytes.Buffer
	if err := run([]string{"inspect", "--data", dir}, &out, &errOut); err != nil || !strings.Contains(out.String(), "archive:") ||
		!strings.Contains(out.String(), " 50 executions") || !strings.Contains(out.String(), "forgotten:") {
		t.Fatalf("inspect summary: %v\n%s%s", err, out.String(), errOut.String())
	}
	out.Reset()
	if err := run([]string{"inspect", "verify", "--data", dir}, &out, &errOut); err != nil || !regexp.MustCompile(`(?m)^archive +ok$`).MatchString(out.String()) {
		t.Fatalf("inspect verify: %v\n%s%s", err, out.String(), errOut.String())
	}
}
