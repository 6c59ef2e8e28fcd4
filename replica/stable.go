package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/vfs"
)

// The stable store's file, replaced whole on every change. Part of the on-disk format.
const (
	stableName    = "stable"
	stableTemp    = "stable.tmp"
	stableMagic   = "EXSTABLE"
	stableVersion = 1
)

// Stable store limits: raft keeps three small keys (the current term, the last vote's term
// and candidate).
const (
	MaxStableKeys       = 64
	MaxStableKeyBytes   = 1 << 10
	MaxStableValueBytes = 64 << 10
)

var stableCastagnoli = crc32.MakeTable(crc32.Castagnoli)

// StableStore is raft's stable store (the current term and the vote) in one small file,
// replaced atomically on every change: the new contents go to a temporary file, which is
// fsynced, renamed over the old one, and the directory fsynced, before Set returns. The file
// is checksummed; a damaged one is refused at open with an error wrapping ErrCorruptStable,
// never read as empty (a node that forgot its vote could vote twice in a term). It
// implements raft.StableStore. Reads are served from memory.
//
// File layout:
//
//	+----------+---------+-------+--------------------------------------------+---------+
//	| magic    | version | count | count × (key len uv, key, value len uv,    | CRC-32C |
//	| EXSTABLE | u32 LE  | uv    |          value), keys ascending, unique    | u32 LE  |
//	+----------+---------+-------+--------------------------------------------+---------+
//
// The checksum covers every byte before it.
type StableStore struct {
	dir  string
	opts StableOptions

	mu     sync.RWMutex
	kv     map[string][]byte
	failed error // non-nil once a write failed; wraps ErrStableFailed
	closed bool
}

// StableOptions configures OpenStableStore. The zero value syncs, on the operating system's
// filesystem.
type StableOptions struct {
	// NoSync skips the fsyncs (tests and benchmarks only). Default false.
	NoSync bool
	// FS holds the store's file. Default vfs.Default, the operating system's.
	FS vfs.FS
}

var _ raft.StableStore = (*StableStore)(nil)

// OpenStableStore opens (or creates) the stable store in dir. A leftover temporary file (a
// crash before its rename) is removed: the file it was to replace is whole.
func OpenStableStore(dir string, opts StableOptions) (*StableStore, error) {
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if err := opts.FS.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("replica: open stable store: %w", err)
	}
	if err := opts.FS.Remove(filepath.Join(dir, stableTemp)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("replica: open stable store: %w", err)
	}
	s := &StableStore{dir: dir, opts: opts, kv: map[string][]byte{}}
	data, err := vfs.ReadFile(opts.FS, filepath.Join(dir, stableName))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("replica: open stable store: %w", err)
	}
	if s.kv, err = decodeStable(data); err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrCorruptStable, filepath.Join(dir, stableName), err)
	}
	return s, nil
}

// Close closes the store; later calls return ErrClosed.
func (s *StableStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	return nil
}

// Set stores val under key, durably.
func (s *StableStore) Set(key, val []byte) error {
	return s.set(key, bytes.Clone(val))
}

// Get returns the value of key, or an empty value (and no error) for a key never set, as
// raft.StableStore documents.
func (s *StableStore) Get(key []byte) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	return bytes.Clone(s.kv[string(key)]), nil
}

// SetUint64 stores val under key as eight big-endian bytes, durably.
func (s *StableStore) SetUint64(key []byte, val uint64) error {
	return s.set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the value SetUint64 stored under key, or 0 for a key never set.
func (s *StableStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	switch {
	case err != nil:
		return 0, err
	case len(v) == 0:
		return 0, nil
	case len(v) != 8:
		return 0, fmt.Errorf("%w: key %q holds %d bytes", ErrBadValue, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// set replaces the file with the store plus key = val, and updates memory once it is
// durable. The caller passes a val it owns.
func (s *StableStore) set(key, val []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.failed != nil:
		return s.failed
	case len(key) == 0 || len(key) > MaxStableKeyBytes:
		return fmt.Errorf("%w: key of %d bytes, want 1 to %d", ErrStableLimit, len(key), MaxStableKeyBytes)
	case len(val) > MaxStableValueBytes:
		return fmt.Errorf("%w: value of %d bytes, max %d", ErrStableLimit, len(val), MaxStableValueBytes)
	}
	if _, ok := s.kv[string(key)]; !ok && len(s.kv) == MaxStableKeys {
		return fmt.Errorf("%w: more than %d keys", ErrStableLimit, MaxStableKeys)
	}
	next := make(map[string][]byte, len(s.kv)+1)
	for k, v := range s.kv {
		next[k] = v
	}
	next[string(key)] = val
	if err := s.replace(encodeStable(next)); err != nil {
		s.failed = fmt.Errorf("%w: %w", ErrStableFailed, err)
		return s.failed
	}
	s.kv = next
	return nil
}

// replace writes data to the temporary file, fsyncs it, renames it over the file and fsyncs
// the directory.
func (s *StableStore) replace(data []byte) error {
	temp, final := filepath.Join(s.dir, stableTemp), filepath.Join(s.dir, stableName)
	fs := s.opts.FS
	if err := writeSynced(fs, temp, data, s.opts.NoSync); err != nil {
		fs.Remove(temp)
		return err
	}
	if err := fs.Rename(temp, final); err != nil {
		fs.Remove(temp)
		return err
	}
	if s.opts.NoSync {
		return nil
	}
	return vfs.SyncDir(fs, s.dir)
}

func writeSynced(fs vfs.FS, path string, data []byte, noSync bool) error {
	file, err := fs.Create(path)
	if err != nil {
		return err
	}
	defer file.Close()
	if _, err := file.Write(data); err != nil {
		return err
	}
	if !noSync {
		if err := file.Sync(); err != nil {
			return err
		}
	}
	return file.Close()
}

// encodeStable encodes kv in the file layout, keys ascending.
func encodeStable(kv map[string][]byte) []byte {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := append([]byte(stableMagic), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[len(stableMagic):], stableVersion)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(kv[k])))
		b = append(b, kv[k]...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, stableCastagnoli))
}

// decodeStable checks and decodes the file's bytes.
func decodeStable(b []byte) (map[string][]byte, error) {
	head := len(stableMagic) + 4
	if len(b) < head+1+4 {
		return nil, fmt.Errorf("file of %d bytes is too short", len(b))
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	switch {
	case string(b[:len(stableMagic)]) != stableMagic:
		return nil, errors.New("bad magic")
	case crc32.Checksum(body, stableCastagnoli) != sum:
		return nil, errors.New("checksum mismatch")
	case binary.LittleEndian.Uint32(b[len(stableMagic):]) != stableVersion:
		return nil, fmt.Errorf("unknown version %d", binary.LittleEndian.Uint32(b[len(stableMagic):]))
	}
	d := entryDecoder{b: body, off: head}
	n := d.uvarint()
	if d.err == "" && n > MaxStableKeys {
		return nil, fmt.Errorf("%d keys, max %d", n, MaxStableKeys)
	}
	kv := make(map[string][]byte, n)
	prev := ""
	for i := uint64(0); i < n && d.err == ""; i++ {
		k, v := string(d.bytes()), d.bytes()
		switch {
		case d.err != "":
		case len(k) == 0 || len(k) > MaxStableKeyBytes || len(v) > MaxStableValueBytes:
			d.fail("a key or value outside the limits")
		case i > 0 && k <= prev:
			d.fail("keys not ascending")
		}
		kv[k], prev = v, k
	}
	if d.err == "" && d.off != len(body) {
		d.fail(fmt.Sprintf("%d bytes after the last key", len(body)-d.off))
	}
	if d.err != "" {
		return nil, errors.New(d.err)
	}
	return kv, nil
}
