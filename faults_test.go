package execstore_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/prealloc"
	"github.com/execstore/execstore/vfs"
)

// A storage fault at any operation on the store's files, not only at the steps the crash
// simulator picks, is survived or stops the store, and never silently: a call returns an
// error (the writes after a failed one ErrStorageFailed), or the store logs a warning (a
// next segment's file that could not be prepared costs only speed). Whatever happened, every
// write that was acknowledged is there when the directory is opened again.
func TestAFaultAtAnyOperationIsSurvivedOrStopsTheStoreLoudly(t *testing.T) {
	// A clean run counts the operations the workload makes; each run after it fails one.
	clean := runFaultWorkload(t, 0)
	if clean.err != nil || clean.fired {
		t.Fatalf("the run without a fault: %v", clean.err)
	}
	if clean.ops < 50 {
		t.Fatalf("test premise: the workload made only %d operations", clean.ops)
	}
	for n := 1; n <= clean.ops; n++ {
		r := runFaultWorkload(t, n)
		if !r.fired {
			continue // an operation of the background compaction that came later this time
		}
		if r.err == nil && !r.warned && !harmless(r.at) {
			t.Errorf("a fault at operation %d (%s) was neither returned nor logged", n, r.at)
		}
		checkAcknowledged(t, r, n)
	}
}

// harmless reports whether a fault at op may go unreported: the removal of the next
// segment's prepared file at Close, which holds none of the log's data and which the next
// Open removes.
func harmless(op vfs.Op) bool {
	return op.Kind == vfs.OpRemove && filepath.Base(op.Path) == prealloc.Name
}

// faultRun is what one run of the workload saw.
type faultRun struct {
	dir    string
	ops    int               // operations the filesystem reported
	fired  bool              // the fault was injected
	at     vfs.Op            // where
	err    error             // the first error a call returned
	warned bool              // the store logged at Warn or above
	acked  map[string]string // keys of acknowledged writes, and their values
}

// runFaultWorkload opens a store whose filesystem fails its nth operation (0: none), writes
// across several segments, takes three snapshots (the log compacted, an old snapshot
// pruned) and closes the store.
func runFaultWorkload(t *testing.T, n int) *faultRun {
	t.Helper()
	r := &faultRun{dir: t.TempDir(), acked: map[string]string{}}
	var mu sync.Mutex
	fs := vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		r.ops++
		if r.ops == n {
			r.fired, r.at = true, op
			return errors.New("injected")
		}
		return nil
	})
	logs := &warnings{}
	opts := execstore.Options{
		Now: newClock().Now, FS: fs, SegmentSize: 4096, Logger: slog.New(logs),
		SnapshotEntries: 1 << 40, SnapshotWALBytes: 1 << 40, // snapshots only when asked
	}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		r.warned = logs.seen()
	}()
	keep := func(err error) {
		if r.err == nil {
			r.err = err
		}
	}
	s, err := execstore.Open(r.dir, opts)
	if err != nil {
		keep(err)
		return r
	}
	ctx := context.Background()
	key := 0
	for round := range 4 {
		for range 8 {
			k, v := string(rune('a'+key%26))+strings.Repeat("k", key), `"`+strings.Repeat("v", 900)+`"`
			key++
			switch err := s.Commit(ctx, execstore.Write{Key: k, Value: []byte(v)}); {
			case err == nil:
				r.acked[k] = v
			case r.err != nil && !errors.Is(err, execstore.ErrStorageFailed):
				t.Errorf("a write after a storage error = %v, want ErrStorageFailed", err)
			default:
				keep(err)
			}
		}
		if round < 3 {
			if err := s.Snapshot(ctx); err != nil {
				keep(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		keep(err)
	}
	return r
}

// checkAcknowledged opens the directory a run left, on the operating system's filesystem,
// and reads back every write it acknowledged.
func checkAcknowledged(t *testing.T, r *faultRun, n int) {
	t.Helper()
	s, err := execstore.Open(r.dir, execstore.Options{Now: newClock().Now})
	if err != nil {
		t.Errorf("after a fault at operation %d (%s): the directory does not open: %v", n, r.at, err)
		return
	}
	defer s.Close()
	for k, v := range r.acked {
		got, ok, err := s.Read(context.Background(), k)
		if err != nil || !ok || string(got) != v {
			t.Errorf("after a fault at operation %d (%s): acknowledged key %.8q reads %v, %v", n, r.at, k, ok, err)
		}
	}
}

// warnings is a slog.Handler that notes whether anything was logged at Warn or above.
type warnings struct {
	mu  sync.Mutex
	any bool
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }

func (w *warnings) Handle(_ context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelWarn {
		w.mu.Lock()
		w.any = true
		w.mu.Unlock()
	}
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) seen() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.any
}
