package wal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/execstore/execstore/internal/mutant"
	"github.com/execstore/execstore/vfs"
)

// cleanMarkerName is the file a clean Close leaves in the log directory. Its name does not
// start with 20 digits, so tidwall ignores it. Part of the on-disk format.
const cleanMarkerName = "clean-close"

// rewriteSuffix names the temporary file the tail segment is rewritten into at Open. It ends
// in .TEMP, so a copy left by a crash before its rename is removed by the next Open (and by
// earlier versions of this package, which remove every *.TEMP file).
const rewriteSuffix = ".REWRITE.TEMP"

// cleanMarker is what a clean-close marker vouches for: the last segment's name and size when
// the log was closed. The zero value vouches for nothing.
type cleanMarker struct {
	tail string
	size int64
}

// writeCleanMarker leaves the marker after a clean Close. It is not fsynced: a marker that a
// crash loses only makes the next Open rewrite the tail, and a marker can only exist once the
// tail's fsync at Close has succeeded. Failing to write it is logged, not returned, for the
// same reason.
func writeCleanMarker(fs vfs.FS, dir string, tail uint64, logger *slog.Logger) {
	name := segmentName(tail)
	fi, err := fs.Stat(filepath.Join(dir, name))
	if err == nil {
		err = vfs.WriteFile(fs, filepath.Join(dir, cleanMarkerName), fmt.Appendf(nil, "tail %s %d\n", name, fi.Size()))
	}
	if err != nil {
		logger.Warn("wal: no clean-close marker; the next open rewrites the last segment", "dir", dir, "err", err)
	}
}

// takeCleanMarker reads and removes the clean-close marker. The removal is made durable by
// the directory fsync every Open makes before it returns, so before the first Write: from
// then on the log may hold bytes whose fsync never succeeded, until the next clean Close.
// A marker that does not parse vouches for nothing.
func takeCleanMarker(fs vfs.FS, dir string) (cleanMarker, error) {
	path := filepath.Join(dir, cleanMarkerName)
	data, err := vfs.ReadFile(fs, path)
	if errors.Is(err, os.ErrNotExist) {
		return cleanMarker{}, nil
	}
	if err != nil {
		return cleanMarker{}, err
	}
	if err := fs.Remove(path); err != nil {
		return cleanMarker{}, err
	}
	var m cleanMarker
	if n, err := fmt.Sscanf(string(data), "tail %s %d\n", &m.tail, &m.size); err != nil || n != 2 {
		return cleanMarker{}, nil
	}
	return m, nil
}

// vouchesFor reports whether the marker vouches for the segment starting at tail as it is in
// dir now: the same name and size as at the clean Close. Anything else (no marker, another
// tail, another size: a later version appended, or damage) is an unclean stop.
func (m cleanMarker) vouchesFor(fs vfs.FS, dir string, tail uint64) bool {
	if m.tail != segmentName(tail) {
		return false
	}
	fi, err := fs.Stat(filepath.Join(dir, m.tail))
	return err == nil && fi.Size() == m.size
}

// rewriteTail makes the bytes of the last segment that Open is about to replay durable for
// real. After a failed fsync the kernel may have marked the segment's dirty pages clean
// without writing them: reads in this boot still return the bytes, a later fsync of the file
// does not write them, and a crash loses them, after recovery replayed them and later
// entries were appended behind them. So the segment is copied from what a read returns now
// into a new file, which is fsynced, renamed over the segment, and the directory fsynced.
// A crash before the rename leaves the old file and a *.TEMP file the next Open removes;
// after it, either file holds the same entries.
func rewriteTail(dir string, start uint64, o Options) (err error) {
	if mutant.SkipTailRewrite {
		return nil
	}
	path := filepath.Join(dir, segmentName(start))
	data, err := vfs.ReadFile(o.FS, path)
	if err != nil {
		return err
	}
	temp := path + rewriteSuffix
	defer func() {
		if err != nil {
			o.FS.Remove(temp) // best effort: the next Open removes it too
		}
	}()
	if err := writeSynced(temp, data, o); err != nil {
		return err
	}
	if err := o.FS.Rename(temp, path); err != nil {
		return err
	}
	if err := syncDir(o, dir); err != nil {
		return err
	}
	o.Logger.Info("wal: rewrote the last segment after an unclean stop", "segment", segmentName(start), "bytes", len(data))
	return nil
}

// writeSynced creates or replaces path with data and fsyncs it, whatever o.NoSync says.
func writeSynced(path string, data []byte, o Options) error {
	return writeThrough(o.FS.Create, path, data, true)
}

// writeThrough creates path with create, writes data and, when sync is set, fsyncs it.
func writeThrough(create func(string) (vfs.File, error), path string, data []byte, sync bool) error {
	f, err := create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return f.Close()
}
