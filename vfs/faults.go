package vfs

import (
	"fmt"
	"io"
	"os"
)

// OpKind names an operation that WithFaults reports.
type OpKind int

// The operations WithFaults reports: every one that changes the namespace or a file, before
// it happens, and every sync, before it and after it succeeded.
const (
	OpCreate        OpKind = iota + 1 // Create or CreateNew
	OpReuseForWrite                   // ReuseForWrite: Path is the old name, NewPath the new
	OpRename                          // Rename: Path is the old name, NewPath the new
	OpRemove                          // Remove
	OpRemoveAll                       // RemoveAll
	OpMkdirAll                        // MkdirAll
	OpLock                            // Lock
	OpWrite                           // File.Write or File.WriteAt
	OpTruncate                        // File.Truncate
	OpSync                            // before File.Sync, of a file or a directory
	OpSyncData                        // before File.SyncData
	OpSynced                          // after a File.Sync or File.SyncData that succeeded
)

var opNames = [...]string{
	OpCreate: "create", OpReuseForWrite: "reuse-for-write", OpRename: "rename", OpRemove: "remove",
	OpRemoveAll: "remove-all", OpMkdirAll: "mkdir-all", OpLock: "lock", OpWrite: "write",
	OpTruncate: "truncate", OpSync: "sync", OpSyncData: "sync-data", OpSynced: "synced",
}

func (k OpKind) String() string {
	if k > 0 && int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", int(k))
}

// Op is one operation WithFaults reports.
type Op struct {
	Kind OpKind
	// Path is the file or directory operated on, as the caller named it when it opened or
	// created it; for Rename and ReuseForWrite, the old name.
	Path string
	// NewPath is the new name of a Rename or ReuseForWrite; empty otherwise.
	NewPath string
}

func (o Op) String() string {
	if o.NewPath != "" {
		return fmt.Sprintf("%s %s -> %s", o.Kind, o.Path, o.NewPath)
	}
	return fmt.Sprintf("%s %s", o.Kind, o.Path)
}

// WithFaults returns fs with inject called at each operation it reports (see OpKind):
// before each operation that changes the namespace or a file, and around each sync. A
// non-nil return makes the operation fail with that error, without doing it; returned at
// OpSynced, the sync fails although what it synced is durable, as a sync whose result was
// lost would. Reads, opens for reading and closes are not reported. inject may be called
// from several goroutines at once: the store syncs its log on the goroutine that writes,
// and writes snapshots on another. A nil inject reports to nobody.
//
// This is how tests and the crash simulator reach the store's storage: they learn what is
// durable at each sync, crash the machine at any operation, or make one fail.
func WithFaults(fs FS, inject func(Op) error) FS {
	if inject == nil {
		inject = func(Op) error { return nil }
	}
	return &faultFS{fs: fs, inject: inject}
}

type faultFS struct {
	fs     FS
	inject func(Op) error
}

func (f *faultFS) file(name string, file File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, name: name, inject: f.inject}, nil
}

func (f *faultFS) Create(name string) (File, error) {
	if err := f.inject(Op{Kind: OpCreate, Path: name}); err != nil {
		return nil, err
	}
	file, err := f.fs.Create(name)
	return f.file(name, file, err)
}

func (f *faultFS) CreateNew(name string) (File, error) {
	if err := f.inject(Op{Kind: OpCreate, Path: name}); err != nil {
		return nil, err
	}
	file, err := f.fs.CreateNew(name)
	return f.file(name, file, err)
}

func (f *faultFS) Open(name string) (File, error) {
	file, err := f.fs.Open(name)
	return f.file(name, file, err)
}

func (f *faultFS) OpenReadWrite(name string) (File, error) {
	file, err := f.fs.OpenReadWrite(name)
	return f.file(name, file, err)
}

func (f *faultFS) OpenDir(name string) (File, error) {
	file, err := f.fs.OpenDir(name)
	return f.file(name, file, err)
}

func (f *faultFS) ReuseForWrite(oldname, newname string) (File, error) {
	if err := f.inject(Op{Kind: OpReuseForWrite, Path: oldname, NewPath: newname}); err != nil {
		return nil, err
	}
	file, err := f.fs.ReuseForWrite(oldname, newname)
	return f.file(newname, file, err)
}

func (f *faultFS) Rename(oldname, newname string) error {
	if err := f.inject(Op{Kind: OpRename, Path: oldname, NewPath: newname}); err != nil {
		return err
	}
	return f.fs.Rename(oldname, newname)
}

func (f *faultFS) Remove(name string) error {
	if err := f.inject(Op{Kind: OpRemove, Path: name}); err != nil {
		return err
	}
	return f.fs.Remove(name)
}

func (f *faultFS) RemoveAll(name string) error {
	if err := f.inject(Op{Kind: OpRemoveAll, Path: name}); err != nil {
		return err
	}
	return f.fs.RemoveAll(name)
}

func (f *faultFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := f.inject(Op{Kind: OpMkdirAll, Path: dir}); err != nil {
		return err
	}
	return f.fs.MkdirAll(dir, perm)
}

func (f *faultFS) Lock(name string) (io.Closer, error) {
	if err := f.inject(Op{Kind: OpLock, Path: name}); err != nil {
		return nil, err
	}
	return f.fs.Lock(name)
}

func (f *faultFS) List(dir string) ([]string, error) { return f.fs.List(dir) }

func (f *faultFS) Stat(name string) (os.FileInfo, error) { return f.fs.Stat(name) }

// faultFile reports the writes, truncations and syncs of a file faultFS opened.
type faultFile struct {
	File
	name   string
	inject func(Op) error
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.inject(Op{Kind: OpWrite, Path: f.name}); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.inject(Op{Kind: OpWrite, Path: f.name}); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.inject(Op{Kind: OpTruncate, Path: f.name}); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *faultFile) Sync() error {
	return f.sync(OpSync, f.File.Sync)
}

func (f *faultFile) SyncData() error {
	return f.sync(OpSyncData, f.File.SyncData)
}

func (f *faultFile) sync(kind OpKind, sync func() error) error {
	if err := f.inject(Op{Kind: kind, Path: f.name}); err != nil {
		return err
	}
	if err := sync(); err != nil {
		return err
	}
	return f.inject(Op{Kind: OpSynced, Path: f.name})
}
