package snapshot

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/mutant"
	"github.com/execstore/execstore/vfs"
)

// Part of the snapshot format.
const (
	magic      = "EXSNAP\r\n"
	Version    = 1
	headerSize = 8 + 4 + 8 + 8 + 8
	prefix     = "snapshot-"
	suffix     = ".snap"
	tmpSuffix  = ".tmp"
)

// ErrCorrupt is wrapped by every error about a snapshot file's contents.
var ErrCorrupt = errors.New("snapshot: corrupt")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is what a snapshot says about itself before its state.
type Header struct {
	Index   uint64 // the last WAL index the state includes
	Clock   int64  // the store's time (fsm.Meta.Now), nanoseconds
	Records uint64 // execution records, for operators
}

// Info names one snapshot file.
type Info struct {
	Path  string
	Index uint64
}

// Options control where and how durably snapshots are written; the zero value syncs, on the
// operating system's filesystem.
type Options struct {
	NoSync bool // skip fsyncs (tests and benchmarks only)
	// FS holds the snapshot files. Default vfs.Default, the operating system's. Every file
	// Write and Prune create, write, sync, rename or remove is its, so that a filesystem that
	// injects faults (vfs.WithFaults) sees each step.
	FS vfs.FS
}

// fs is the FS the options name, or the operating system's.
func (o Options) fs() vfs.FS {
	if o.FS == nil {
		return vfs.Default
	}
	return o.FS
}

// Name returns the file name of the snapshot covering index.
func Name(index uint64) string { return fmt.Sprintf("%s%020d%s", prefix, index, suffix) }

// Write encodes st into dir as the snapshot covering h.Index, atomically and
// durably: temporary file, fsync, rename, directory fsync. st must not change
// while Write runs (pass an fsm.State.Copy). An error leaves no new file under
// a snapshot's name, so that nothing counts on a snapshot whose name a crash
// may lose.
func Write(dir string, st *fsm.State, h Header, opts Options) (Info, error) {
	fs := opts.fs()
	if err := fs.MkdirAll(dir, 0o750); err != nil {
		return Info{}, fmt.Errorf("snapshot: %w", err)
	}
	if !opts.NoSync {
		// The snapshot directory's own entry, in case MkdirAll just made it.
		if err := syncDir(filepath.Dir(dir), opts); err != nil {
			return Info{}, err
		}
	}
	final := filepath.Join(dir, Name(h.Index))
	tmp := final + tmpSuffix
	if err := writeFile(tmp, st, h, opts); err != nil {
		fs.Remove(tmp)
		return Info{}, err
	}
	_, statErr := fs.Stat(final)
	replaced := statErr == nil // the same index written again: the same state
	if err := fs.Rename(tmp, final); err != nil {
		fs.Remove(tmp)
		return Info{}, fmt.Errorf("snapshot: rename: %w", err)
	}
	if !opts.NoSync && !mutant.SnapshotSkipDirSync {
		if err := syncDir(dir, opts); err != nil {
			// The new name may not be durable, and after a failed fsync no
			// later one of the directory is trusted to make it so. Left in
			// place it would count as one of the snapshots kept, and the
			// store would truncate its log behind a file a crash may lose.
			if !replaced {
				fs.Remove(final)
			}
			return Info{}, err
		}
	}
	return Info{Path: final, Index: h.Index}, nil
}

func writeFile(path string, st *fsm.State, h Header, opts Options) error {
	f, err := opts.fs().Create(path)
	if err != nil {
		return fmt.Errorf("snapshot: create: %w", err)
	}
	defer f.Close()
	var out io.Writer = f
	if !opts.NoSync {
		out = &syncingWriter{f: f}
	}
	sum, err := encodeBody(out, st, h)
	if err != nil {
		return fmt.Errorf("snapshot: write: %w", err)
	}
	if _, err := f.Write(binary.LittleEndian.AppendUint32(nil, sum)); err != nil {
		return fmt.Errorf("snapshot: write: %w", err)
	}
	if !opts.NoSync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("snapshot: fsync: %w", err)
		}
	}
	return f.Close()
}

// encodeBody writes the header and the state to out, paced (see yielding), and returns the
// checksum of what it wrote, which the caller appends.
func encodeBody(out io.Writer, st *fsm.State, h Header) (uint32, error) {
	sum := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(out, sum), 256<<10)
	var hdr [headerSize]byte
	copy(hdr[:], magic)
	binary.LittleEndian.PutUint32(hdr[8:], Version)
	binary.LittleEndian.PutUint64(hdr[12:], h.Index)
	binary.LittleEndian.PutUint64(hdr[20:], uint64(h.Clock))
	binary.LittleEndian.PutUint64(hdr[28:], h.Records)
	if _, err := w.Write(hdr[:]); err != nil {
		return 0, err
	}
	if err := st.Encode(yielding{w}); err != nil {
		return 0, err
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	return sum.Sum32(), nil
}

// Encode writes st to w in the snapshot format, header and checksum included: the bytes a
// snapshot file holds. st must not change while Encode runs (pass an fsm.State.Copy). It is
// paced as Write is. A replicated store keeps and sends its snapshots through its consensus
// library's files, in this same format; durability is the writer's business.
func Encode(w io.Writer, st *fsm.State, h Header) error {
	sum, err := encodeBody(w, st, h)
	if err == nil {
		_, err = w.Write(binary.LittleEndian.AppendUint32(nil, sum))
	}
	if err != nil {
		return fmt.Errorf("snapshot: encode: %w", err)
	}
	return nil
}

// Decode reads one snapshot in the format Encode writes from r, to its end, and checks it as
// Read does: magic, version, checksum, the state's own structure, the header's agreement
// with the state, and nothing after the checksum. Reading a stream, it cannot verify the
// checksum before decoding as Read does: the state decoder bounds what a corrupt count makes
// it allocate, and the state is returned only once the checksum matched. A problem with the
// contents is an error wrapping ErrCorrupt.
func Decode(r io.Reader) (*fsm.State, Header, error) {
	const name = "(stream)"
	tr := &trailerReader{r: r}
	sum := crc32.New(castagnoli)
	br := bufio.NewReaderSize(io.TeeReader(tr, sum), 256<<10)
	var hdr [headerSize]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, Header{}, streamErr(err, "header")
	}
	h, err := parseHeader(name, hdr[:])
	if err != nil {
		return nil, Header{}, err
	}
	st, err := fsm.DecodeState(br)
	if err != nil {
		if tr.err != nil && !errors.Is(tr.err, io.EOF) {
			return nil, Header{}, fmt.Errorf("snapshot: read: %w", tr.err)
		}
		return nil, Header{}, corrupt(name, "%v", err)
	}
	rest, err := io.Copy(io.Discard, br)
	if err != nil {
		return nil, Header{}, fmt.Errorf("snapshot: read: %w", err)
	}
	switch {
	case tr.held < 4:
		return nil, Header{}, corrupt(name, "no checksum after the state")
	case rest != 0:
		return nil, Header{}, corrupt(name, "%d bytes after the state", rest)
	}
	if got, want := sum.Sum32(), binary.LittleEndian.Uint32(tr.trailer[:]); got != want {
		return nil, Header{}, corrupt(name, "checksum mismatch (computed %08x, stored %08x)", got, want)
	}
	if st.Meta().Now != h.Clock || uint64(st.Len()) != h.Records {
		return nil, Header{}, corrupt(name, "header disagrees with the state")
	}
	return st, h, nil
}

func streamErr(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt("(stream)", "ends inside the %s", what)
	}
	return fmt.Errorf("snapshot: read: %w", err)
}

// trailerReader passes on every byte of r except the last four, which it holds back in
// trailer: the checksum, which must not be hashed. At r's end it returns io.EOF with the
// trailer full, or with held < 4 when r was shorter than a checksum.
type trailerReader struct {
	r       io.Reader
	trailer [4]byte
	held    int
	err     error  // r's first error, io.EOF included
	buf     []byte // reused between reads
}

func (t *trailerReader) Read(p []byte) (int, error) {
	for {
		if t.err != nil {
			return 0, t.err
		}
		if len(p) == 0 {
			return 0, nil
		}
		// Read into p behind the held bytes, then hand out all but the last four of the
		// held and new bytes together.
		if need := t.held + len(p); cap(t.buf) < need {
			t.buf = make([]byte, need)
		}
		buf := t.buf[:t.held+len(p)]
		copy(buf, t.trailer[:t.held])
		n, err := t.r.Read(buf[t.held:])
		t.err = err
		total := t.held + n
		out := max(0, total-4)
		copy(p, buf[:out])
		t.held = copy(t.trailer[:], buf[out:total])
		if out > 0 || t.err != nil {
			if out > 0 {
				return out, nil
			}
			return 0, t.err
		}
	}
}

func syncDir(dir string, opts Options) error {
	d, err := opts.fs().OpenDir(dir)
	if err != nil {
		return fmt.Errorf("snapshot: open directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("snapshot: fsync directory: %w", err)
	}
	return nil
}

// List returns the snapshot files in dir, newest (highest index) first. A
// missing directory has none.
func List(fs vfs.FS, dir string) ([]Info, error) {
	names, err := fs.List(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	var out []Info
	for _, name := range names {
		digits, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		digits, ok = strings.CutSuffix(digits, suffix)
		if !ok || len(digits) != 20 {
			continue
		}
		index, err := strconv.ParseUint(digits, 10, 64)
		if err != nil {
			continue
		}
		path := filepath.Join(dir, name)
		if fi, err := fs.Stat(path); err == nil && fi.IsDir() {
			continue
		}
		out = append(out, Info{Path: path, Index: index})
	}
	slices.SortFunc(out, func(a, b Info) int { return -cmpUint(a.Index, b.Index) })
	return out, nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Check reads back a snapshot that was just written from st with header
// want, BEFORE anything older is deleted: its checksum, then its whole state,
// parsed by fsm.CheckState with every rule the decoder applies, which must
// agree with what was encoded: the same last index, clock and record count,
// the same counters and the same number of due executions. A checksum is
// computed over the bytes the encoder wrote, so it cannot catch an encoder
// that wrote the wrong state; the parse can. It builds nothing (a fraction
// of a decoding's time and garbage) and is paced like the encoder (a pause
// after each chunk read), so that it keeps to a fraction of a core.
func Check(fs vfs.FS, path string, want Header, st *fsm.State) error {
	h, err := Verify(fs, path)
	if err != nil {
		return err
	}
	if h != want {
		return corrupt(path, "header %+v, written as %+v", h, want)
	}
	f, state, err := openState(fs, path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(yieldingReader{state}, 256<<10)
	got, err := fsm.CheckState(r)
	if err != nil {
		return corrupt(path, "%v", err)
	}
	if rest, _ := io.Copy(io.Discard, r); rest != 0 {
		return corrupt(path, "%d bytes after the state", rest)
	}
	if wantSum := st.Summary(); got != wantSum {
		return corrupt(path, "reads back as %+v, encoded from %+v", got, wantSum)
	}
	return nil
}

// openState opens a snapshot file and returns a reader of its state: the
// file without its header and checksum.
func openState(fs vfs.FS, path string) (vfs.File, io.Reader, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	return f, io.NewSectionReader(f, headerSize, fi.Size()-headerSize-4), nil
}

// Read reads a snapshot file and checks it: magic, version, checksum, and
// the state's own structure. The checksum is verified in a first pass, so
// the state decoder only ever sees bytes that were written whole. Any problem
// is an error wrapping ErrCorrupt (or the I/O error).
func Read(fs vfs.FS, path string) (*fsm.State, Header, error) {
	h, err := Verify(fs, path)
	if err != nil {
		return nil, Header{}, err
	}
	f, state, err := openState(fs, path)
	if err != nil {
		return nil, Header{}, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(state, 256<<10)
	st, err := fsm.DecodeState(r)
	if err != nil {
		return nil, Header{}, corrupt(path, "%v", err)
	}
	if rest, _ := io.Copy(io.Discard, r); rest != 0 {
		return nil, Header{}, corrupt(path, "%d bytes after the state", rest)
	}
	if st.Meta().Now != h.Clock || uint64(st.Len()) != h.Records {
		return nil, Header{}, corrupt(path, "header disagrees with the state")
	}
	return st, h, nil
}

// Verify checks a snapshot file's header and checksum without decoding its
// state, and returns its header.
func Verify(fs vfs.FS, path string) (Header, error) {
	f, err := fs.Open(path)
	if err != nil {
		return Header{}, fmt.Errorf("snapshot: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Header{}, fmt.Errorf("snapshot: %w", err)
	}
	if fi.Size() < headerSize+4 {
		return Header{}, corrupt(path, "file of %d bytes is shorter than a header and checksum", fi.Size())
	}
	sum := crc32.New(castagnoli)
	r := bufio.NewReaderSize(io.TeeReader(io.LimitReader(f, fi.Size()-4), sum), 256<<10)
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Header{}, fmt.Errorf("snapshot: read %s: %w", path, err)
	}
	h, err := parseHeader(path, hdr[:])
	if err != nil {
		return Header{}, err
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return Header{}, fmt.Errorf("snapshot: read %s: %w", path, err)
	}
	var tail [4]byte
	if _, err := io.ReadFull(f, tail[:]); err != nil {
		return Header{}, fmt.Errorf("snapshot: read %s: %w", path, err)
	}
	if got, want := sum.Sum32(), binary.LittleEndian.Uint32(tail[:]); got != want {
		return Header{}, corrupt(path, "checksum mismatch (computed %08x, stored %08x)", got, want)
	}
	return h, nil
}

func parseHeader(path string, hdr []byte) (Header, error) {
	if string(hdr[:8]) != magic {
		return Header{}, corrupt(path, "not a snapshot (bad magic)")
	}
	if v := binary.LittleEndian.Uint32(hdr[8:]); v != Version {
		return Header{}, corrupt(path, "unknown version %d", v)
	}
	return Header{
		Index:   binary.LittleEndian.Uint64(hdr[12:]),
		Clock:   int64(binary.LittleEndian.Uint64(hdr[20:])),
		Records: binary.LittleEndian.Uint64(hdr[28:]),
	}, nil
}

func corrupt(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrCorrupt, path, fmt.Sprintf(format, args...))
}

// Prune keeps the newest `keep` snapshots in dir and removes older ones and
// any leftover temporary files, then fsyncs the directory. It returns the
// snapshots kept, newest first.
func Prune(dir string, keep int, opts Options) ([]Info, error) {
	names, err := opts.fs().List(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	changed := false
	for _, name := range names {
		if strings.HasPrefix(name, prefix) && strings.HasSuffix(name, tmpSuffix) {
			if err := remove(filepath.Join(dir, name), opts); err != nil {
				return nil, fmt.Errorf("snapshot: remove temporary file: %w", err)
			}
			changed = true
		}
	}
	all, err := List(opts.fs(), dir)
	if err != nil {
		return nil, err
	}
	for len(all) > keep {
		old := all[len(all)-1]
		if err := remove(old.Path, opts); err != nil {
			return nil, fmt.Errorf("snapshot: remove %s: %w", old.Path, err)
		}
		all = all[:len(all)-1]
		changed = true
	}
	if changed && !opts.NoSync {
		if err := syncDir(dir, opts); err != nil {
			return nil, err
		}
	}
	return all, nil
}

func remove(path string, opts Options) error {
	return opts.fs().Remove(path)
}

// syncEvery is how much of a snapshot is written between fsyncs. Syncing as
// it goes keeps the page cache from holding hundreds of megabytes of dirty
// snapshot data, which a file system like ext4 may otherwise flush inside
// the store's next WAL fsync, stalling writes for the whole flush.
const syncEvery = 1 << 20

// syncingWriter fsyncs its file after every syncEvery bytes.
type syncingWriter struct {
	f       vfs.File
	pending int
}

func (w *syncingWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.pending += n
	if err == nil && w.pending >= syncEvery {
		w.pending = 0
		if err = w.f.Sync(); err != nil {
			err = fmt.Errorf("fsync: %w", err)
		}
	}
	return n, err
}

// yielding passes writes on and then pauses. The state encoder writes every
// 64 KiB, in about 100-200 us; pausing half a millisecond after each chunk
// keeps the encoder to about a quarter of a core. On a machine with few
// cores an encoder running flat out (plus the kernel writing its pages back)
// keeps the store's writer goroutine waiting for a CPU each time it returns
// from an fsync, multiplying a write's tail latency while a snapshot runs;
// paced, a 1,000,000-record snapshot takes under a second longer and the
// writes' p99 stays within twice its quiet value
// (BenchmarkAdmitLatencyDuringSnapshot).
type yielding struct{ w io.Writer }

// snapshotPause is the pause after each encoded chunk.
const snapshotPause = 500 * time.Microsecond

func (y yielding) Write(p []byte) (int, error) {
	n, err := y.w.Write(p)
	time.Sleep(snapshotPause)
	return n, err
}

// yieldingReader passes reads on, at most readChunk bytes each, and pauses
// after each, as yielding does for writes, so that the read-back of a
// snapshot just written keeps to a fraction of a core.
type yieldingReader struct{ r io.Reader }

// readChunk is what the decoder gets between pauses: about half a
// millisecond of decoding.
const readChunk = 64 << 10

func (y yieldingReader) Read(p []byte) (int, error) {
	if len(p) > readChunk {
		p = p[:readChunk]
	}
	n, err := y.r.Read(p)
	time.Sleep(snapshotPause)
	return n, err
}
