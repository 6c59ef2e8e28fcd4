package replica

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/wal"
)

// LogStore is raft's log on this project's write-ahead log: one wal entry per raft log, at
// the same index, so that the wal's frame checks every entry's index and checksum, its
// torn-tail repair and fail-stop apply unchanged, and a batch of logs is one wal Write (one
// write and one fsync). It implements raft.LogStore and raft.MonotonicLogStore.
//
// raft calls StoreLogs and suffix deletions from its main goroutine, prefix deletions
// (compaction after a snapshot) from its snapshot goroutine, and GetLog from replication
// goroutines; LogStore is safe for that.
type LogStore struct {
	log *wal.Log

	// mu serializes the methods that change the log, so that DeleteRange classifies a range
	// against the log it then changes. Prefix deletions release it before the wal's
	// compaction, which never holds up a Write.
	mu sync.Mutex
	// deleting serializes DeleteRange calls (it is taken before mu), so that no Reset or
	// TruncateBack runs while a compaction works without mu: the cut a compaction chose
	// stays below LastIndex, which only StoreLogs changes meanwhile, by appending.
	deleting sync.Mutex
	batch    wal.Batch // reused by StoreLogs
	buf      []byte    // reused payload buffer

	// first is raft's first index while the log is not empty. A prefix deletion moves it at
	// once; the wal removes whole segment files only, so entries below it may stay on disk
	// until a later compaction (and show again after a reopen: they are committed entries a
	// snapshot covers, harmless to keep). Invariant: when the wal holds entries,
	// wal.FirstIndex() <= first <= wal.LastIndex().
	first atomic.Uint64
}

var (
	_ raft.LogStore          = (*LogStore)(nil)
	_ raft.MonotonicLogStore = (*LogStore)(nil)
)

// OpenLogStore opens (or creates) the log in dir with the wal's options; see wal.Open for
// what it repairs and refuses.
func OpenLogStore(dir string, opts wal.Options) (*LogStore, error) {
	l, err := wal.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	s := &LogStore{log: l}
	s.first.Store(l.FirstIndex())
	return s, nil
}

// Close closes the wal.
func (s *LogStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.Close()
}

// WAL returns the log underneath, for its statistics (FirstIndex, LastSync, TailRepair).
// Writing to it directly breaks the store.
func (s *LogStore) WAL() *wal.Log { return s.log }

// IsMonotonic reports true: logs must be stored without gaps, so raft removes every log after
// it installs a snapshot, and the next StoreLogs starts the log again at the snapshot's index
// + 1 (see StoreLogs).
func (s *LogStore) IsMonotonic() bool { return true }

// FirstIndex returns the index of the first log, 0 when the log is empty.
func (s *LogStore) FirstIndex() (uint64, error) {
	if s.log.FirstIndex() > s.log.LastIndex() {
		return 0, nil
	}
	return max(s.first.Load(), s.log.FirstIndex()), nil
}

// LastIndex returns the index of the last log, 0 when the log is empty.
func (s *LogStore) LastIndex() (uint64, error) {
	if s.log.FirstIndex() > s.log.LastIndex() {
		return 0, nil
	}
	return s.log.LastIndex(), nil
}

// GetLog reads the log at index into l; raft.ErrLogNotFound when the log does not hold it.
func (s *LogStore) GetLog(index uint64, l *raft.Log) error {
	if index < s.first.Load() {
		return raft.ErrLogNotFound
	}
	payload, err := s.log.Read(index)
	switch {
	case errors.Is(err, wal.ErrOutOfRange):
		return raft.ErrLogNotFound
	case err != nil:
		return fmt.Errorf("replica: get log %d: %w", index, err)
	}
	return decodeEntry(index, payload, l)
}

// StoreLog stores one log; see StoreLogs.
func (s *LogStore) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

// StoreLogs appends logs, which must be consecutive and follow LastIndex, with one wal Write:
// one write and one fsync, durable when it returns (an append of more than storeBatchBytes
// is written as several, each durable before the next). On an empty log the first may have
// any index: after raft installed a snapshot (and removed every log), the log restarts at
// the snapshot's index + 1, by a wal Reset before the Write. Logs that do not continue the
// log are refused with ErrNotContiguous, and a log past the wal's limits with
// wal.ErrTooLarge; nothing is written. A storage error fail-stops the wal: every later change fails until
// the store is reopened.
func (s *LogStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	for i, l := range logs[1:] {
		if l.Index != logs[i].Index+1 {
			return fmt.Errorf("%w: log %d follows log %d", ErrNotContiguous, l.Index, logs[i].Index)
		}
	}
	for _, l := range logs {
		if n := entryLen(l); n > wal.MaxPayloadBytes {
			return fmt.Errorf("replica: store log %d: %w: an entry of %d bytes, more than %d", l.Index, wal.ErrTooLarge, n, wal.MaxPayloadBytes)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// An append larger than one wal batch holds (raft sends up to MaxAppendEntries logs,
	// each up to a wal entry) is written as several batches, each durable before the next:
	// a crash between them leaves a prefix of the append, which raft repairs as it repairs
	// any follower behind.
	for len(logs) > 0 {
		n, err := s.storeSome(logs)
		if err != nil {
			return err
		}
		logs = logs[n:]
	}
	if cap(s.buf) > 1<<20 {
		s.buf = nil // one large log does not pin its buffer
	}
	return nil
}

// storeSome writes as many of logs as one wal batch holds (at least one) and returns how
// many. The caller holds s.mu.
func (s *LogStore) storeSome(logs []*raft.Log) (int, error) {
	s.batch.Reset()
	n, size := 0, 0
	for _, l := range logs {
		s.buf = appendEntry(s.buf[:0], l)
		if n > 0 && (n == wal.MaxBatchEntries || size+len(s.buf) > storeBatchBytes) {
			break
		}
		s.batch.Add(s.buf)
		size += len(s.buf)
		n++
	}
	part := logs[:n]
	if err := s.batch.Err(); err != nil {
		return 0, fmt.Errorf("replica: store logs %d to %d: %w", part[0].Index, part[n-1].Index, err)
	}
	empty := s.log.FirstIndex() > s.log.LastIndex()
	switch next := s.log.LastIndex() + 1; {
	case part[0].Index == next:
	case empty:
		if err := s.log.Reset(part[0].Index); err != nil {
			return 0, fmt.Errorf("replica: start the log at %d: %w", part[0].Index, err)
		}
	default:
		return 0, fmt.Errorf("%w: log %d after last index %d", ErrNotContiguous, part[0].Index, next-1)
	}
	if empty {
		s.first.Store(part[0].Index)
	}
	if _, err := s.log.Write(&s.batch); err != nil {
		return 0, fmt.Errorf("replica: store logs %d to %d: %w", part[0].Index, part[n-1].Index, err)
	}
	return n, nil
}

// storeBatchBytes bounds the payload of one wal batch StoreLogs writes: a quarter of what a
// wal batch holds, so that a large append is written in parts of bounded size.
const storeBatchBytes = wal.MaxBatchBytes / 4

// DeleteRange deletes the logs from min to max, inclusive. raft deletes a prefix after a
// snapshot (compaction: the wal removes the whole segment files the prefix covers, in the
// background of writes), a suffix when a follower's log conflicts with the leader's (the
// wal's TruncateBack), and everything after installing a snapshot (the wal's Reset, at
// max + 1). The parts of the range outside the log are ignored; a range strictly inside it
// is refused with ErrRangeUnsupported. Durable when it returns, except that a compacted
// prefix may show again after a reopen until its segment files can go (see LogStore).
func (s *LogStore) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	s.deleting.Lock()
	defer s.deleting.Unlock()
	s.mu.Lock()
	if s.log.FirstIndex() > s.log.LastIndex() {
		s.mu.Unlock()
		return nil
	}
	first, last := s.first.Load(), s.log.LastIndex()
	switch {
	case max < first || min > last:
		s.mu.Unlock()
		return nil
	case min <= first && max >= last:
		defer s.mu.Unlock()
		if err := s.log.Reset(max + 1); err != nil {
			return fmt.Errorf("replica: delete logs %d to %d: %w", min, max, err)
		}
		s.first.Store(max + 1)
		return nil
	case max >= last:
		defer s.mu.Unlock()
		if err := s.log.TruncateBack(min - 1); err != nil {
			return fmt.Errorf("replica: delete logs %d to %d: %w", min, max, err)
		}
		return nil
	case min <= first:
		s.first.Store(max + 1)
		s.mu.Unlock()
		if _, err := s.log.CompactTo(max + 1); err != nil {
			return fmt.Errorf("replica: delete logs %d to %d: %w", min, max, err)
		}
		return nil
	}
	s.mu.Unlock()
	return fmt.Errorf("%w: delete %d to %d from [%d, %d]", ErrRangeUnsupported, min, max, first, last)
}
