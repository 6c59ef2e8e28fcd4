package sim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// disk tracks what is durable in one store directory: for every file, the bytes
// it held at its last fsync and whether its directory entry is durable. It
// learns from the syncs at the crash points (points: every fsync the log and
// the snapshot package issue themselves) and, for the operations between
// crash points, from documented facts about them:
//
//   - tidwall/wal fsyncs a segment before it creates the next one (cycle), so
//     a segment that has a successor is whole;
//   - a segment file may be one the log prepared ahead of time, zeros fsynced
//     (not a crash point), that tidwall renamed to the segment's name: its
//     entries are followed by zeros (padding) that the next writes overwrite,
//     so its durable bytes end where its entries do, whatever the file's size;
//   - the log's compaction takes segment files out of the log oldest first,
//     each by a rename to <segment>.DROPPED followed by a directory fsync
//     (crash points): at most one removal is pending; it deletes the dropped
//     files afterwards, and Open deletes any left;
//   - the log rewrites its last segment at Open into <segment>.REWRITE.TEMP,
//     fsyncs it (a crash point), renames it over the segment and fsyncs the
//     directory (a crash point): a durable temporary file that has vanished
//     was renamed;
//   - the snapshot package writes a temporary file, fsyncs it, renames it and
//     fsyncs the directory, and prunes with a directory fsync, all BEFORE the
//     store touches the log, so a snapshot file is durable by the time the
//     store's next log operation starts.
//
// It also models the kernel's answer to a failed fsync: the dirty pages of
// the last segment may be marked clean without reaching the disk. Reads in
// the same boot still return those bytes, but no later fsync of that file
// writes them; only a new file holding them (the rewrite at Open) does.
//
// From that, image derives a directory an operating-system crash could leave.
type disk struct {
	root string
	// strictDirs: a tracked directory created since its parent's last fsync
	// may vanish in a crash, as POSIX allows (see Config.StrictDirs).
	strictDirs bool

	mu    sync.Mutex
	files map[string]*fileRec // by path relative to root, slash-separated
	dirs  map[string]bool     // tracked directories whose entry in root is durable

	// archive holds the store's archive (Options.Archive), in memory: a
	// crash keeps what it synced (see image).
	archive *pebblevfs.MemFS
}

// fileRec is what is durable of one file.
type fileRec struct {
	durable []byte // contents at the last fsync (or when the directory was opened)
	entry   bool   // its directory entry is durable
	// lost are byte ranges whose pages a failed fsync left clean but unwritten: the
	// disk holds zeros there (newly allocated blocks), whatever is fsynced later.
	lost [][2]int
	// poisoned: a failed fsync of its directory may have dropped its entry,
	// and no later directory fsync is trusted to make it durable, as long as
	// the name is that file's (inode ino): one removed and created again is a
	// new entry.
	poisoned bool
	ino      uint64
}

// mask returns data with the lost ranges zeroed: what the disk holds of a file
// whose pages hold data.
func (r *fileRec) mask(data []byte) []byte {
	if r == nil || len(r.lost) == 0 {
		return data
	}
	out := slices.Clone(data)
	for _, l := range r.lost {
		if l[0] < len(out) {
			clear(out[l[0]:min(l[1], len(out))])
		}
	}
	return out
}

// rewriteSuffix names the temporary file the log rewrites its last segment
// into at Open (wal's rewriteTail).
const rewriteSuffix = ".REWRITE.TEMP"

// trackedDirs are the store's subdirectories that hold its files.
var trackedDirs = []string{"wal", "snapshots"}

// newDisk starts tracking root as it is on disk now: everything in it is
// durable, as it is after a crash or a clean close.
func newDisk(root string, strictDirs bool) (*disk, error) {
	// Absolute, as tidwall names the log's files whatever the store was given.
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	d := &disk{root: root, strictDirs: strictDirs, files: make(map[string]*fileRec), dirs: make(map[string]bool)}
	for _, sub := range trackedDirs {
		if fi, err := os.Stat(filepath.Join(root, sub)); err == nil && fi.IsDir() {
			d.dirs[sub] = true
		}
		names, err := listFiles(filepath.Join(root, sub))
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			rel := sub + "/" + name
			data, err := os.ReadFile(filepath.Join(root, rel))
			if err != nil {
				return nil, err
			}
			d.files[rel] = &fileRec{durable: data, entry: true}
		}
	}
	return d, nil
}

// listFiles returns the regular files in dir, sorted; a missing dir has none.
func listFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// rel returns path relative to the store directory, or false if it is outside.
func (d *disk) rel(path string) (string, bool) {
	if !filepath.IsAbs(path) {
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", false
		}
		path = abs
	}
	r, err := filepath.Rel(d.root, path)
	if err != nil || strings.HasPrefix(r, "..") {
		return "", false
	}
	return filepath.ToSlash(r), true
}

// synced records a successful fsync of path: a file, one of the tracked
// directories, or the store directory itself (which makes the entries of the
// tracked directories that exist durable).
func (d *disk) synced(path string) error {
	rel, ok := d.rel(path)
	if !ok {
		return fmt.Errorf("sim: fsync outside the store directory: %s", path)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if rel == "." {
		for _, sub := range trackedDirs {
			if fi, err := os.Stat(filepath.Join(d.root, sub)); err == nil && fi.IsDir() {
				d.dirs[sub] = true
			}
		}
		return nil
	}
	if slices.Contains(trackedDirs, rel) {
		return d.dirSyncedLocked(rel)
	}
	return d.fileSyncedLocked(rel)
}

// fileSyncedLocked reads the file's contents as durable. Log segments are only
// written after their entries between fsyncs, over the zeros a prepared
// segment file starts with or by appending (a repair or a truncation shrinks
// one, and then it is reread whole), so only the bytes past the durable
// entries are read.
func (d *disk) fileSyncedLocked(rel string) error {
	rec := d.files[rel]
	if rec == nil {
		rec = &fileRec{}
		d.files[rel] = rec
	}
	f, err := os.Open(filepath.Join(d.root, rel))
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size < int64(len(rec.durable)) || strings.HasPrefix(rel, "snapshots/") {
		// Shrunk (a repair), or a snapshot's temporary file, which may be
		// written again from the start: reread whole.
		rec.durable = nil
		for i := range rec.lost {
			rec.lost[i][1] = min(rec.lost[i][1], int(size))
		}
	}
	rec.durable = rec.durable[:written(rel, rec.durable)]
	grow := make([]byte, size-int64(len(rec.durable)))
	if _, err := f.ReadAt(grow, int64(len(rec.durable))); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	rec.durable = rec.mask(append(rec.durable, grow...))
	return nil
}

// written is how much of a file's contents the writes since they were read
// leave alone: all of them, but for a log segment, whose zeros after its
// entries (padding: the rest of a prepared file) are written over.
func written(rel string, data []byte) int {
	if name, ok := strings.CutPrefix(rel, "wal/"); ok {
		if _, seg := segmentIndex(name); seg {
			return entriesEnd(data)
		}
	}
	return len(data)
}

// entriesEnd walks a segment's tidwall entries (a uvarint length, then the
// data) and returns where they end: at a zero byte where an entry would start
// (the padding), or at the end of data. An entry's own bytes may end in zeros,
// so the padding cannot be told from the bytes alone. Bytes that do not parse
// as an entry are taken as written: the walk ends after them.
func entriesEnd(data []byte) int {
	off := 0
	for off < len(data) && data[off] != 0 {
		n, k := binary.Uvarint(data[off:])
		if k <= 0 || n > uint64(len(data)-off-k) {
			return len(data)
		}
		off += k + int(n)
	}
	return off
}

// dirSyncedLocked makes the directory's entries durable: present files stay,
// removed ones are gone for good, and a rewritten segment's temporary file
// that was renamed over it is the segment now. Every log segment but the
// newest has a successor, so tidwall fsynced it whole.
func (d *disk) dirSyncedLocked(sub string) error {
	names, err := listFiles(filepath.Join(d.root, sub))
	if err != nil {
		return err
	}
	present := make(map[string]bool, len(names))
	for _, name := range names {
		present[sub+"/"+name] = true
	}
	newest := ""
	for _, name := range names {
		if _, ok := segmentIndex(name); ok {
			newest = name
		}
	}
	for _, name := range names {
		rel := sub + "/" + name
		rec := d.files[rel]
		if rec != nil && rec.poisoned && inode(filepath.Join(d.root, rel)) != rec.ino {
			// Removed and created again since the failed fsync: a new entry.
			delete(d.files, rel)
			rec = nil
		}
		if t := d.renamedFrom(sub, name, names); t != nil && (rec == nil || !rec.poisoned) {
			// A copy created and fsynced since the last directory fsync, and gone:
			// renamed into place, a new file. (A durable one that is gone was removed.)
			rec = &fileRec{durable: t.durable}
			d.files[rel] = rec
		}
		if rec == nil {
			rec = &fileRec{}
			d.files[rel] = rec
		}
		rec.entry = !rec.poisoned
		if _, seg := segmentIndex(name); seg && sub == "wal" && name != newest {
			if err := d.wholeLocked(rel, rec); err != nil {
				return err
			}
		}
	}
	for rel := range d.files {
		if strings.HasPrefix(rel, sub+"/") && !present[rel] {
			delete(d.files, rel)
		}
	}
	return nil
}

// wholeLocked makes a file's contents durable as they are now (less its lost
// ranges), reading it only when its size changed or it may have been written
// over its padding.
func (d *disk) wholeLocked(rel string, rec *fileRec) error {
	fi, err := os.Stat(filepath.Join(d.root, rel))
	if err != nil || fi.Size() == int64(len(rec.durable)) && written(rel, rec.durable) == len(rec.durable) {
		return err
	}
	data, err := os.ReadFile(filepath.Join(d.root, rel))
	if err != nil {
		return err
	}
	rec.durable = rec.mask(data)
	return nil
}

// storageError records an injected storage error: the log may have met it in
// an fsync.
func (d *disk) storageError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lostLocked()
}

// lostLocked applies a failed fsync's effect to the log's last segment: the
// bytes written since its last successful fsync stay in the page cache, marked
// clean, and never reach the disk through a later fsync of the same file.
// Every other segment was fsynced whole when its successor was created.
func (d *disk) lostLocked() error {
	names, err := listFiles(filepath.Join(d.root, "wal"))
	if err != nil {
		return err
	}
	tail := ""
	for _, name := range names {
		if _, ok := segmentIndex(name); ok {
			tail = name
		}
	}
	if tail == "" {
		return nil
	}
	rel := "wal/" + tail
	fi, err := os.Stat(filepath.Join(d.root, rel))
	if err != nil {
		return err
	}
	rec := d.files[rel]
	if rec == nil {
		rec = &fileRec{}
		d.files[rel] = rec
	}
	if lo, hi := written(rel, rec.durable), int(fi.Size()); hi > lo {
		rec.lost = append(rec.lost, [2]int{lo, hi})
	}
	return nil
}

// poison records a failed fsync of a tracked directory: the entries it was
// to make durable (files created or renamed since the last fsync that
// succeeded) may have been dropped with the failed journal commit, and no
// later fsync of the directory is trusted to bring them back. Each stays a
// file a crash may lose until it is removed.
func (d *disk) poison(sub string) error {
	names, err := listFiles(filepath.Join(d.root, sub))
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, name := range names {
		rel := sub + "/" + name
		rec := d.files[rel]
		if rec != nil && rec.entry {
			continue
		}
		if rec == nil {
			rec = &fileRec{}
			if t := d.renamedFrom(sub, name, names); t != nil {
				rec.durable = t.durable
			}
			d.files[rel] = rec
		}
		rec.poisoned, rec.ino = true, inode(filepath.Join(d.root, rel))
	}
	return nil
}

// inode returns a file's inode number, or 0.
func inode(path string) uint64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// renamedFrom returns the record of the temporary file that name in sub was
// renamed from since the directory's last fsync, or nil: a temporary file
// created since then, fsynced, and gone while name is there.
func (d *disk) renamedFrom(sub, name string, present []string) *fileRec {
	temp := name + tempSuffix(sub)
	t := d.files[sub+"/"+temp]
	if t == nil || slices.Contains(present, temp) {
		return nil
	}
	// A log segment's temporary copy that was durable before and is gone was
	// removed; a snapshot that was not there before came from its temporary
	// file, even one left durable by an earlier run and written again.
	if t.entry && (sub == "wal" || d.files[sub+"/"+name] != nil) {
		return nil
	}
	return t
}

// tempSuffix is the suffix of the temporary files renamed into place in sub.
func tempSuffix(sub string) string {
	if sub == "wal" {
		return rewriteSuffix
	}
	return ".tmp"
}

// closed applies what tidwall/wal does when the log closes: it fsyncs the
// tail segment (every other segment was fsynced when its successor was
// created), so every segment's contents are durable, less the ranges a failed
// fsync lost. Directory entries are not.
func (d *disk) closed() error {
	names, err := listFiles(filepath.Join(d.root, "wal"))
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, name := range names {
		if _, ok := segmentIndex(name); !ok {
			continue
		}
		data, err := os.ReadFile(filepath.Join(d.root, "wal", name))
		if err != nil {
			return err
		}
		rel := "wal/" + name
		if rec := d.files[rel]; rec != nil {
			rec.durable = rec.mask(data)
		} else {
			d.files[rel] = &fileRec{durable: data}
		}
	}
	return nil
}

// file is one file of a crash image.
type file struct {
	rel  string
	data []byte
}

// crashImage is a directory an operating-system crash could leave, and a
// short description of the choices that made it.
type crashImage struct {
	files []file
	desc  []string
	// archive is what a crash kept of the store's archive: what it synced,
	// nothing more (Pebble's own crash model); in it, the archive is in
	// archiveRoot/archive.
	archive     *pebblevfs.MemFS
	archiveRoot string
}

func (im *crashImage) note(format string, args ...any) {
	im.desc = append(im.desc, fmt.Sprintf(format, args...))
}

// image derives a crash image from what is durable and what is on disk now.
func (d *disk) image(rng *rand.Rand) (*crashImage, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	im := &crashImage{}
	if d.archive != nil {
		im.archive, im.archiveRoot = d.archive.CrashClone(pebblevfs.CrashCloneCfg{}), d.root
	}
	if err := d.walImage(rng, im); err != nil {
		return nil, err
	}
	if err := d.otherImage(rng, im, "snapshots"); err != nil {
		return nil, err
	}
	if d.strictDirs {
		// Nothing fsyncs the store's directory, so a subdirectory created
		// since it was opened may be gone, with everything in it.
		for _, sub := range trackedDirs {
			if d.dirs[sub] || rng.IntN(2) == 0 {
				continue
			}
			im.note("%s/ missing: its creation was never made durable", sub)
			im.files = slices.DeleteFunc(im.files, func(f file) bool { return strings.HasPrefix(f.rel, sub+"/") })
		}
	}
	return im, nil
}

// current reads a file of the store directory; missing is nil, false.
func (d *disk) current(rel string) ([]byte, bool, error) {
	data, err := os.ReadFile(filepath.Join(d.root, rel))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	return data, err == nil, err
}

// segmentIndex parses a tidwall segment name (20 digits, not all zero).
func segmentIndex(name string) (uint64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(name, 10, 64)
	return v, err == nil && v != 0
}

// walImage derives the log directory: segment removals whose directory fsync
// has not happened yet persisted as a prefix, in the order they were made
// (oldest first), or not; a rename of a rewritten last segment whose
// directory fsync has not happened persisted or not; segments whose entries
// are not durable surviving as a prefix (journaling file systems persist
// namespace operations in order, so none survives a removal that did not);
// and the last segment keeping its durable bytes and any cut of the rest.
func (d *disk) walImage(rng *rand.Rand, im *crashImage) error {
	names, err := listFiles(filepath.Join(d.root, "wal"))
	if err != nil {
		return err
	}
	var segs, fresh, others []string
	for _, n := range names {
		if _, ok := segmentIndex(n); !ok {
			others = append(others, n)
		} else if rec := d.files["wal/"+n]; rec != nil && rec.entry {
			segs = append(segs, n)
		} else {
			fresh = append(fresh, n)
		}
	}
	live := map[string][]byte{}  // the image's log directory
	current := map[string]bool{} // files whose bytes are what is in the file now
	for _, name := range append(slices.Clone(segs), fresh...) {
		data, _, err := d.current("wal/" + name)
		if err != nil {
			return err
		}
		live[name], current[name] = d.files["wal/"+name].mask(data), true
	}
	for _, name := range segs {
		d.pendingRename(rng, im, name, live, current)
	}
	complete := d.removals(rng, im, names, live)
	m := 0
	if complete {
		m = rng.IntN(len(fresh) + 1)
	}
	if m < len(fresh) {
		im.note("wal: %d of %d new segments survive", m, len(fresh))
	}
	for _, name := range fresh[m:] {
		delete(live, name)
	}
	files := slices.Sorted(maps.Keys(live))
	lastSeg := ""
	for _, name := range files {
		if _, ok := segmentIndex(name); ok {
			lastSeg = name
		}
	}
	for _, name := range files {
		data := live[name]
		if name == lastSeg && current[name] {
			data = d.cutTail(rng, im, "wal/"+name, data)
		}
		im.files = append(im.files, file{rel: "wal/" + name, data: data})
	}
	if err := d.otherFiles(rng, im, "wal", others); err != nil {
		return err
	}
	// A durable file other than a segment that is gone (a temporary file Open
	// removed) may come back, its removal lost.
	var gone []string
	for rel, rec := range d.files {
		name, ok := strings.CutPrefix(rel, "wal/")
		if _, seg := segmentIndex(name); ok && !seg && rec.entry && !slices.Contains(names, name) {
			gone = append(gone, name)
		}
	}
	slices.Sort(gone)
	for _, name := range gone {
		if rng.IntN(2) == 0 {
			im.note("wal/%s: removal lost", name)
			im.files = append(im.files, file{rel: "wal/" + name, data: d.files["wal/"+name].durable})
		}
	}
	return nil
}

// pendingRename decides a rename of segment name's rewritten copy that no
// directory fsync has made durable yet: either the copy is the segment, or
// the old file is, and the copy (whose creation may have persisted) is back
// under its temporary name.
func (d *disk) pendingRename(rng *rand.Rand, im *crashImage, name string, live map[string][]byte, current map[string]bool) {
	temp := d.files["wal/"+name+rewriteSuffix]
	if temp == nil || temp.entry {
		return // no copy, or one that was there before and is being removed
	}
	if _, err := os.Stat(filepath.Join(d.root, "wal", name+rewriteSuffix)); err == nil {
		return // not renamed yet: an ordinary new file
	}
	if rng.IntN(2) == 0 {
		im.note("wal/%s: rewritten copy renamed into place", name)
		live[name], current[name] = temp.durable, false
		return
	}
	im.note("wal/%s: rename of the rewritten copy lost", name)
	if rng.IntN(2) == 0 {
		live[name+rewriteSuffix] = temp.durable
	}
}

// removals replays a prefix of the segment removals no directory fsync has
// made durable yet, oldest first (the order compaction removes them in):
// the others come back with their durable contents. It reports whether every
// removal persisted.
func (d *disk) removals(rng *rand.Rand, im *crashImage, names []string, live map[string][]byte) bool {
	var removed []string
	for rel, rec := range d.files {
		name, ok := strings.CutPrefix(rel, "wal/")
		if !ok || !rec.entry || slices.Contains(names, name) {
			continue
		}
		if _, seg := segmentIndex(name); seg {
			removed = append(removed, name)
		}
	}
	if len(removed) == 0 {
		return true
	}
	slices.Sort(removed)
	k := rng.IntN(len(removed) + 1)
	if k < len(removed) {
		im.note("wal: %d of %d segment removals persisted", k, len(removed))
	}
	for _, name := range removed[k:] {
		live[name] = d.files["wal/"+name].durable
	}
	return k == len(removed)
}

// otherImage derives a directory of files that are written whole and synced
// (snapshots, side files): durable entries stay, new ones may be missing, and
// the unsynced part of any file may be cut.
func (d *disk) otherImage(rng *rand.Rand, im *crashImage, sub string) error {
	names, err := listFiles(filepath.Join(d.root, sub))
	if err != nil {
		return err
	}
	if err := d.otherFiles(rng, im, sub, names); err != nil {
		return err
	}
	// Removed files whose removal is not durable come back with their durable
	// contents.
	var gone []string
	for rel, rec := range d.files {
		name, ok := strings.CutPrefix(rel, sub+"/")
		if ok && rec.entry && !slices.Contains(names, name) {
			gone = append(gone, name)
		}
	}
	slices.Sort(gone)
	for _, name := range gone {
		if rng.IntN(2) == 0 {
			im.note("%s: removal lost", traceName(sub+"/"+name))
			im.files = append(im.files, file{rel: sub + "/" + name, data: d.files[sub+"/"+name].durable})
		}
	}
	return nil
}

func (d *disk) otherFiles(rng *rand.Rand, im *crashImage, sub string, names []string) error {
	for _, name := range names {
		rel := sub + "/" + name
		rec := d.files[rel]
		if t := d.renamedFrom(sub, name, names); rec == nil && t != nil {
			// Renamed from a synced temporary file, the directory not synced
			// since: the rename persisted, or the temporary file (whose
			// creation may have been lost too) is still there.
			if rng.IntN(2) == 0 {
				im.files = append(im.files, file{rel: rel, data: t.durable})
				continue
			}
			im.note("%s: rename lost", traceName(rel))
			if rng.IntN(2) == 0 {
				im.files = append(im.files, file{rel: rel + tempSuffix(sub), data: t.durable})
			}
			continue
		}
		if rec == nil || !rec.entry {
			if rng.IntN(2) == 0 {
				im.note("%s: new file missing", traceName(rel))
				continue
			}
		}
		data, ok, err := d.current(rel)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		im.files = append(im.files, file{rel: rel, data: d.cutTail(rng, im, rel, data)})
	}
	return nil
}

// cutTail returns the contents a crash could leave of a file that holds cur
// now: its durable bytes, then any cut of the unsynced rest, which may be cut
// short (at any byte, or a 512-byte or 4 KiB boundary), extended with zeros,
// garbage or stale bytes, or written back sector by sector in any order. A
// file shrunk since its fsync (a truncation) is either length. A log segment's
// unsynced rest starts after its durable entries, over its padding; the cuts
// that leave it shorter than its durable size are more than a crash can do,
// and recovery must take them all the same.
func (d *disk) cutTail(rng *rand.Rand, im *crashImage, rel string, cur []byte) []byte {
	rec := d.files[rel]
	var durable []byte
	if rec != nil {
		durable = rec.durable
	}
	if bytes.Equal(durable, cur) {
		return cur
	}
	lo, hi := written(rel, durable), len(cur)
	if !bytes.HasPrefix(cur, durable[:lo]) || hi < len(durable) {
		// Shrunk or rewritten since its fsync: metadata changes are atomic.
		if rng.IntN(2) == 0 {
			im.note("%s: change since fsync lost (%d bytes, not %d)", traceName(rel), len(durable), len(cur))
			return durable
		}
		return cur
	}
	mode := rng.IntN(6)
	if mode == 0 {
		c := pickOffset(rng, lo, hi)
		im.note("%s: cut at %d (durable %d, written %d)", traceName(rel), c, lo, hi)
		return slices.Clone(cur[:c])
	}
	// The rest keep a prefix of the unsynced bytes and fill [c, end) with
	// what the disk may hold instead of the data: the file's size reached end.
	c := pickOffset(rng, lo, hi-1)
	end := hi
	if rng.IntN(3) == 0 {
		end = pickOffset(rng, c+1, hi)
	}
	out := slices.Clone(cur[:c])
	switch mode {
	case 1:
		out = append(out, make([]byte, end-c)...)
		im.note("%s: cut at %d, zeros to %d (durable %d, written %d)", traceName(rel), c, end, lo, hi)
	case 2:
		out = append(out, garbage(rng, end-c)...)
		im.note("%s: cut at %d, garbage to %d (durable %d, written %d)", traceName(rel), c, end, lo, hi)
	case 3:
		out = append(out, stale(rng, cur, end-c)...)
		im.note("%s: cut at %d, stale bytes to %d (durable %d, written %d)", traceName(rel), c, end, lo, hi)
	default:
		out = sectors(rng, cur, lo, end)
		im.note("%s: sectors of [%d,%d) written back at random (written %d)", traceName(rel), lo, end, hi)
	}
	return out
}

// pickOffset picks an offset in [lo, hi]: an end, any byte, or a 512-byte or
// 4 KiB boundary.
func pickOffset(rng *rand.Rand, lo, hi int) int {
	if lo >= hi {
		return lo
	}
	switch rng.IntN(5) {
	case 0:
		return lo
	case 1:
		return hi
	case 2:
		return align(rng, lo, hi, 512)
	case 3:
		return align(rng, lo, hi, 4096)
	}
	return lo + rng.IntN(hi-lo+1)
}

// align picks a multiple of unit in [lo, hi], or an end if there is none.
func align(rng *rand.Rand, lo, hi, unit int) int {
	first := (lo + unit - 1) / unit * unit
	if first > hi {
		return []int{lo, hi}[rng.IntN(2)]
	}
	n := (hi-first)/unit + 1
	return first + rng.IntN(n)*unit
}

func garbage(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// stale returns n bytes copied from elsewhere in data, as a reused block
// would hold: old, well-formed entries with the wrong index.
func stale(rng *rand.Rand, data []byte, n int) []byte {
	b := make([]byte, n)
	if len(data) == 0 {
		return b
	}
	src := rng.IntN(len(data))
	for i := range b {
		b[i] = data[(src+i)%len(data)]
	}
	return b
}

// sectors writes back the 512-byte sectors of cur[lo:end) in any order: each
// one is on disk as written, zeros, or garbage.
func sectors(rng *rand.Rand, cur []byte, lo, end int) []byte {
	out := slices.Clone(cur[:end])
	for s := lo / 512 * 512; s < end; s += 512 {
		from, to := max(s, lo), min(s+512, end)
		switch rng.IntN(4) {
		case 0:
			clear(out[from:to])
		case 1:
			copy(out[from:to], garbage(rng, to-from))
		}
	}
	return out
}

// write materializes the image as a store directory at dir.
func (im *crashImage) write(dir string) error {
	for _, sub := range trackedDirs {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o750); err != nil {
			return err
		}
	}
	for _, f := range im.files {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(f.rel)), f.data, 0o640); err != nil {
			return err
		}
	}
	return nil
}

// copyStore copies the tracked directories of a store directory, as they are
// now, to dst.
func copyStore(src, dst string) error {
	for _, sub := range trackedDirs {
		names, err := listFiles(filepath.Join(src, sub))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dst, sub), 0o750); err != nil {
			return err
		}
		for _, name := range names {
			data, err := os.ReadFile(filepath.Join(src, sub, name))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dst, sub, name), data, 0o640); err != nil {
				return err
			}
		}
	}
	return nil
}

// cloneArchive copies an archive's filesystem as it is, for a second store
// (nil for none).
func cloneArchive(fs *pebblevfs.MemFS) *pebblevfs.MemFS {
	if fs == nil {
		return nil
	}
	return fs.CrashClone(pebblevfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
}
