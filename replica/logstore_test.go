package replica

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/vfs"
	"github.com/execstore/execstore/wal"
)

// testWAL makes segments of a few dozen logs, so that compaction removes files.
var testWAL = wal.Options{SegmentSize: 2048}

func openLogStore(t testing.TB, dir string) *LogStore {
	t.Helper()
	s, err := OpenLogStore(dir, testWAL)
	if err != nil {
		t.Fatalf("OpenLogStore: %v", err)
	}
	return s
}

// logsAt returns n logs from index on, in term, each with data naming its index and term.
func logsAt(index uint64, n int, term uint64) []*raft.Log {
	out := make([]*raft.Log, n)
	for i := range out {
		at := index + uint64(i)
		out[i] = &raft.Log{Index: at, Term: term, Type: raft.LogCommand,
			Data:       fmt.Appendf(nil, "log %d of term %d, padded to some length.......", at, term),
			AppendedAt: time.Unix(1_700_000_000+int64(at), 0)}
	}
	return out
}

// logModel is what a LogStore must hold: raft's view, [first, last], and every log ever
// stored at each index (the latest), which a compacted prefix may show again after a reopen.
type logModel struct {
	first, last uint64 // 0, 0 when empty
	stored      map[uint64]raft.Log
}

func (m *logModel) store(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	for i, l := range logs[1:] {
		if l.Index != logs[i].Index+1 {
			return ErrNotContiguous
		}
	}
	if m.last != 0 && logs[0].Index != m.last+1 {
		return ErrNotContiguous
	}
	if m.last == 0 {
		m.first = logs[0].Index
	}
	for _, l := range logs {
		m.stored[l.Index] = *l
	}
	m.last = logs[len(logs)-1].Index
	return nil
}

func (m *logModel) deleteRange(min, max uint64) error {
	switch {
	case m.last == 0 || max < m.first || min > m.last:
	case min <= m.first && max >= m.last:
		m.first, m.last = 0, 0
	case max >= m.last:
		m.last = min - 1
	case min <= m.first:
		m.first = max + 1
	default:
		return ErrRangeUnsupported
	}
	return nil
}

// check compares s with the model. After a reopen (reopened), the store may start below the
// model's first index, with the logs stored there before: the model then adopts it, as raft
// does (it deletes prefixes from FirstIndex on).
func (m *logModel) check(t *testing.T, s *LogStore, reopened bool) {
	t.Helper()
	first, err := s.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err := s.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if last != m.last || (first != m.first && !(reopened && m.first != 0 && first < m.first)) {
		t.Fatalf("store holds [%d, %d], want [%d, %d] (reopened: %v)", first, last, m.first, m.last, reopened)
	}
	for index := first; index <= last && last != 0; index++ {
		var got raft.Log
		if err := s.GetLog(index, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", index, err)
		}
		if diff := cmp.Diff(m.stored[index], got, logOpts); diff != "" {
			t.Fatalf("GetLog(%d) (-want +got):\n%s", index, diff)
		}
	}
	m.first = first
	for _, index := range []uint64{0, first - 1, last + 1, last + 100} {
		if index >= first && index <= last && last != 0 {
			continue
		}
		var got raft.Log
		if err := s.GetLog(index, &got); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("GetLog(%d) outside [%d, %d] = %v, want raft.ErrLogNotFound", index, first, last, err)
		}
	}
}

// logOp is one step of a scenario: a change, applied to the store and to the model alike.
type logOp struct {
	name string
	do   func(LogStoreAPI) error
}

// LogStoreAPI is what a scenario step may call: the store under test, or the model.
type LogStoreAPI interface {
	FirstIndex() (uint64, error)
	StoreLogs([]*raft.Log) error
	DeleteRange(min, max uint64) error
}

type modelAPI struct{ m *logModel }

func (a modelAPI) FirstIndex() (uint64, error)       { return a.m.first, nil }
func (a modelAPI) StoreLogs(logs []*raft.Log) error  { return a.m.store(logs) }
func (a modelAPI) DeleteRange(min, max uint64) error { return a.m.deleteRange(min, max) }

func store(index uint64, n int, term uint64) logOp {
	return logOp{fmt.Sprintf("store %d logs from %d in term %d", n, index, term),
		func(s LogStoreAPI) error { return s.StoreLogs(logsAt(index, n, term)) }}
}

func storeOne(index, term uint64) logOp {
	return logOp{fmt.Sprintf("store log %d in term %d", index, term), func(s LogStoreAPI) error {
		if st, ok := s.(*LogStore); ok {
			return st.StoreLog(logsAt(index, 1, term)[0])
		}
		return s.StoreLogs(logsAt(index, 1, term))
	}}
}

// delPrefix deletes from FirstIndex to max, as raft's compaction does.
func delPrefix(max uint64) logOp {
	return logOp{fmt.Sprintf("delete from the first index to %d", max), func(s LogStoreAPI) error {
		first, err := s.FirstIndex()
		if err != nil {
			return err
		}
		return s.DeleteRange(first, max)
	}}
}

func del(min, max uint64) logOp {
	return logOp{fmt.Sprintf("delete %d to %d", min, max), func(s LogStoreAPI) error { return s.DeleteRange(min, max) }}
}

func TestLogStoreMatchesTheModelAfterEveryStepAndReopen(t *testing.T) {
	tests := []struct {
		name string
		ops  []logOp
	}{
		{"batches and single logs", []logOp{store(1, 10, 1), storeOne(11, 1), store(12, 64, 2), storeOne(76, 3)}},
		{"a new store starting past 1", []logOp{store(100, 20, 4), store(120, 5, 4)}},
		{"a prefix deleted, as after a snapshot", []logOp{store(1, 200, 1), delPrefix(90), delPrefix(150), store(201, 3, 1)}},
		{"a suffix deleted and rewritten in a later term", []logOp{store(1, 120, 1), del(60, 120), store(60, 10, 2)}},
		{"a suffix deleted past the end", []logOp{store(1, 120, 1), del(100, 1<<40), store(100, 1, 2)}},
		{"a suffix inside the tail segment", []logOp{store(1, 120, 1), del(119, 120), store(119, 4, 3)}},
		{"the only log deleted as a suffix", []logOp{store(1, 1, 1), del(1, 1), store(1, 2, 2)}},
		{"a prefix, then a suffix", []logOp{store(1, 200, 1), delPrefix(120), del(150, 200), store(150, 5, 2)}},
		{"everything deleted, then logs after a snapshot", []logOp{store(1, 100, 1), del(1, 100), store(5000, 10, 3)}},
		{"everything deleted, then logs before the old first", []logOp{store(1, 100, 1), delPrefix(60), delPrefix(100), store(30, 10, 3)}},
		{"everything deleted, then the next index", []logOp{store(1, 100, 1), del(1, 100), store(101, 3, 1)}},
		{"everything deleted twice", []logOp{store(1, 10, 1), del(1, 10), del(1, 10), store(11, 1, 1)}},
		{"ranges outside the log change nothing", []logOp{store(10, 20, 1), del(1, 9), del(30, 40), del(5, 4)}},
		{"a range inside the log is refused", []logOp{store(1, 50, 1), del(10, 20), store(51, 1, 1)}},
		{"a gap after the last log is refused", []logOp{store(1, 5, 1), store(7, 2, 1), store(6, 1, 1)}},
		{"an overlap with the last log is refused", []logOp{store(1, 5, 1), store(5, 2, 2), store(3, 1, 2)}},
		{"logs out of order in a batch are refused", []logOp{store(1, 5, 1), {"store 6, 8", func(s LogStoreAPI) error {
			return s.StoreLogs([]*raft.Log{logsAt(6, 1, 1)[0], logsAt(8, 1, 1)[0]})
		}}, store(6, 1, 1)}},
		{"an empty batch stores nothing", []logOp{{"store nothing", func(s LogStoreAPI) error { return s.StoreLogs(nil) }}, store(1, 1, 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openLogStore(t, dir)
			defer func() { s.Close() }()
			m := &logModel{stored: map[uint64]raft.Log{}}
			for _, op := range tt.ops {
				wantErr := op.do(modelAPI{m})
				err := op.do(s)
				if !errors.Is(err, wantErr) || (wantErr == nil) != (err == nil) {
					t.Fatalf("%s: err = %v, want %v", op.name, err, wantErr)
				}
				m.check(t, s, false)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = openLogStore(t, dir)
				m.check(t, s, true)
			}
		})
	}
}

func TestLogStoreRefusesALogPastTheWALLimitAndWritesNothing(t *testing.T) {
	s := openLogStore(t, t.TempDir())
	defer s.Close()
	if err := s.StoreLogs(logsAt(1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	big := logsAt(4, 2, 1)
	big[1].Data = make([]byte, wal.MaxPayloadBytes)
	if err := s.StoreLogs(big); !errors.Is(err, wal.ErrTooLarge) {
		t.Fatalf("StoreLogs of a log past MaxPayloadBytes = %v, want wal.ErrTooLarge", err)
	}
	if last, _ := s.LastIndex(); last != 3 {
		t.Fatalf("LastIndex = %d after a refused batch, want 3", last)
	}
	if err := s.StoreLogs(logsAt(4, 1, 1)); err != nil {
		t.Fatalf("StoreLogs after a refused batch: %v", err)
	}
}

func TestLogStoreIsMonotonic(t *testing.T) {
	var s raft.LogStore = openLogStore(t, t.TempDir())
	defer s.(*LogStore).Close()
	m, ok := s.(raft.MonotonicLogStore)
	if !ok || !m.IsMonotonic() {
		t.Fatal("LogStore must be a monotonic log store: raft then removes every log after installing a snapshot")
	}
}

func TestLogStoreStoresOneBatchWithOneWriteAndOneFsync(t *testing.T) {
	var writes, syncs int
	opts := testWAL
	opts.FS = vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
		if name := filepath.Base(op.Path); len(name) != 20 || strings.Trim(name, "0123456789") != "" {
			return nil // not a segment file: the next segment's file, prepared after the write
		}
		switch op.Kind {
		case vfs.OpWrite:
			writes++
		case vfs.OpSync, vfs.OpSyncData:
			syncs++
		}
		return nil
	})
	s, err := OpenLogStore(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writes, syncs = 0, 0
	if err := s.StoreLogs(logsAt(1, 20, 1)); err != nil {
		t.Fatal(err)
	}
	if writes != 1 || syncs != 1 {
		t.Fatalf("StoreLogs of 20 logs: %d writes and %d fsyncs, want 1 and 1", writes, syncs)
	}
}

// TestLogStoreUnderConcurrentCalls runs appends, prefix deletions and reads at once, as raft's
// main, snapshot and replication goroutines do, for the race detector.
func TestLogStoreUnderConcurrentCalls(t *testing.T) {
	s := openLogStore(t, t.TempDir())
	defer s.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { // the snapshot goroutine: compaction
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			first, _ := s.FirstIndex()
			last, _ := s.LastIndex()
			if last > first+40 {
				if err := s.DeleteRange(first, last-20); err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	go func() { // replication: reads of recent logs
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			last, _ := s.LastIndex()
			var l raft.Log
			if err := s.GetLog(last, &l); err != nil && !errors.Is(err, raft.ErrLogNotFound) {
				errs <- err
				return
			}
		}
	}()
	for i := range 300 {
		if err := s.StoreLogs(logsAt(uint64(i)*4+1, 4, 1)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if last, _ := s.LastIndex(); last != 1200 {
		t.Fatalf("LastIndex = %d, want 1200", last)
	}
}

func TestLogStoreWritesAnAppendLargerThanOneWALBatchInParts(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenLogStore(dir, wal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// 80 logs of 4 MiB: 320 MiB, more than a wal batch's 256 MiB.
	data := bytes.Repeat([]byte{7}, 4<<20)
	var logs []*raft.Log
	for i := range 80 {
		logs = append(logs, &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs of 320 MiB: %v", err)
	}
	if last, _ := s.LastIndex(); last != 80 {
		t.Fatalf("LastIndex = %d, want 80", last)
	}
	var l raft.Log
	if err := s.GetLog(80, &l); err != nil || !bytes.Equal(l.Data, data) {
		t.Fatalf("GetLog(80): %v", err)
	}
	// A log past the wal's entry limit writes nothing, even behind logs that fit.
	big := &raft.Log{Index: 82, Term: 1, Type: raft.LogCommand, Data: make([]byte, wal.MaxPayloadBytes)}
	err = s.StoreLogs([]*raft.Log{{Index: 81, Term: 1, Type: raft.LogCommand, Data: data}, big})
	if !errors.Is(err, wal.ErrTooLarge) {
		t.Fatalf("StoreLogs with an entry past the limit = %v, want wal.ErrTooLarge", err)
	}
	if last, _ := s.LastIndex(); last != 80 {
		t.Fatalf("LastIndex after the refusal = %d, want 80", last)
	}
}
