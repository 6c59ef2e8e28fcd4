package execstore_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

// A fenced write refused for a lost lease is logged as a warning naming an
// execution and counting them, at most once every ten seconds of the clock.
func TestLostLeasesAreLoggedAsAWarningAtMostOnceEveryTenSeconds(t *testing.T) {
	f := newFixture(t)
	logs := &logRecorder{}
	f.opts.Logger = slog.New(logs)
	f.reopen()
	id := f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	stale := f.claimOne(id)
	f.clock.Advance(time.Hour) // the lease expires: the next claim supersedes it
	f.claimOne(id)
	steps := []struct {
		advance time.Duration
		lines   int
		count   int64 // of the latest line
	}{
		{0, 1, 1},
		{time.Second, 1, 1},     // within ten seconds: counted, not logged
		{5 * time.Second, 1, 1}, // still within
		{5 * time.Second, 2, 3}, // ten seconds after the first line: the three since
	}
	for i, s := range steps {
		f.clock.Advance(s.advance)
		if _, err := f.s.Renew(ctx, stale, time.Minute); !errors.Is(err, execstore.ErrLeaseLost) {
			t.Fatalf("step %d: renew of a superseded lease: %v", i, err)
		}
		lines := logs.about("lease is no longer current")
		if len(lines) != s.lines {
			t.Fatalf("step %d: %d lines, want %d", i, len(lines), s.lines)
		}
		last := lines[len(lines)-1]
		if last.level != slog.LevelWarn || last.attrs["count"].Int64() != s.count ||
			last.attrs["example_execution"].String() != "e" || last.attrs["example_command"].String() != "renew" {
			t.Fatalf("step %d: line %v %v, want a warning counting %d for e's renew", i, last.level, last.attrs, s.count)
		}
	}
}

// A snapshot is logged at info level, and so is the compaction of the log
// behind the older kept snapshot.
func TestSnapshotsAndCompactionsAreLoggedAtInfo(t *testing.T) {
	f := newFixture(t)
	logs := &logRecorder{}
	f.opts.Logger = slog.New(logs)
	f.opts.SegmentSize = 4096
	f.reopen()
	for round := range 3 {
		for i := range 50 {
			f.admit(execstore.AdmitRequest{WorkflowID: "w", Params: raw(`{"round":` + string(rune('0'+round)) + `,"i":"` + string(rune('a'+i%26)) + `"}`)})
		}
		if err := f.s.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
	}
	snaps, compactions := logs.about("snapshot written"), logs.about("log compacted")
	if len(snaps) != 3 || len(compactions) == 0 {
		t.Fatalf("%d snapshot lines and %d compaction lines, want 3 and at least 1", len(snaps), len(compactions))
	}
	for _, l := range append(snaps, compactions...) {
		if l.level != slog.LevelInfo {
			t.Errorf("%q logged at %v, want info", l.msg, l.level)
		}
	}
	c := compactions[len(compactions)-1]
	if c.attrs["first_index"].Uint64() <= c.attrs["first_index_before"].Uint64() {
		t.Errorf("compaction line %v does not move the first index", c.attrs)
	}
}
