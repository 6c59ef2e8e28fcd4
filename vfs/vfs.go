package vfs

import (
	"io"
	"os"
)

// File is an open file or directory of an FS: what the store reads, writes, truncates and
// syncs through. Write and WriteAt, Truncate, Sync and SyncData change or persist the file;
// the others only read it. The store calls them from one goroutine at a time per file.
type File interface {
	io.Closer
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt

	// Stat describes the open file.
	Stat() (os.FileInfo, error)

	// Truncate changes the file's size, as os.File.Truncate does.
	Truncate(size int64) error

	// Sync makes the file's contents and metadata durable (fsync). On a directory, it makes
	// the names created, renamed and removed in it durable.
	Sync() error

	// SyncData makes the file's contents durable, and the metadata needed to read them back
	// (its size), but not its timestamps (fdatasync). Where the system has no such call it
	// is Sync.
	SyncData() error
}

// FS is a namespace of files: the one the store keeps its directory in. Names are paths as
// the operating system spells them. Default is the operating system's.
//
// The methods that change the namespace or a file (Create, CreateNew, ReuseForWrite,
// Rename, Remove, RemoveAll, MkdirAll, Lock) are what a fault-injecting FS (WithFaults)
// reports, with the writes, truncations and syncs of the files it opens.
type FS interface {
	// Create creates the named file for reading and writing, truncating it if it exists.
	Create(name string) (File, error)

	// CreateNew creates the named file for reading and writing; it fails, with an error
	// matching fs.ErrExist, if the file exists.
	CreateNew(name string) (File, error)

	// Open opens the named file for reading.
	Open(name string) (File, error)

	// OpenReadWrite opens the named file, which must exist, for reading and writing from its
	// start, without truncating it.
	OpenReadWrite(name string) (File, error)

	// OpenDir opens the named directory, to Sync it.
	OpenDir(name string) (File, error)

	// ReuseForWrite renames the file oldname to newname and opens it, as newname, for
	// reading and writing from its start, without truncating it: how a file prepared ahead
	// of time becomes the file it was prepared for.
	ReuseForWrite(oldname, newname string) (File, error)

	// Rename renames a file, replacing any file at newname, as os.Rename does.
	Rename(oldname, newname string) error

	// Remove removes the named file or empty directory.
	Remove(name string) error

	// RemoveAll removes the named file or directory and everything in it; a name that does
	// not exist is no error.
	RemoveAll(name string) error

	// MkdirAll creates a directory and any missing parents, as os.MkdirAll does.
	MkdirAll(dir string, perm os.FileMode) error

	// Lock takes an exclusive lock on the named file, creating it if needed, so that two
	// processes never own the same directory; it fails at once if another holds the lock.
	// Closing the returned Closer releases it.
	Lock(name string) (io.Closer, error)

	// List returns the names of the entries of a directory, sorted.
	List(dir string) ([]string, error)

	// Stat describes the named file.
	Stat(name string) (os.FileInfo, error)
}

// ReadFile reads the whole named file, as os.ReadFile does.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := 0
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 && int64(int(fi.Size())) == fi.Size() {
		size = int(fi.Size())
	}
	data := make([]byte, 0, size+1) // one byte more, to see the end without growing
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return data, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
}

// WriteFile creates or truncates the named file and writes data to it, without syncing it.
func WriteFile(fs FS, name string, data []byte) error {
	f, err := fs.Create(name)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncDir makes the names created, renamed and removed in a directory durable.
func SyncDir(fs FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
