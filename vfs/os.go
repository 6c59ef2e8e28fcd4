package vfs

import (
	"io"
	"os"
	"syscall"
)

// Default is the operating system's filesystem: the FS the store uses unless told otherwise.
// Files are created with permission 0640, before the umask.
var Default FS = osFS{}

const filePerm = 0o640

type osFS struct{}

// osFile is an *os.File with SyncData.
type osFile struct{ *os.File }

func (f osFile) SyncData() error { return fdatasync(f.File) }

func wrap(f *os.File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Create(name string) (File, error) {
	return wrap(os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, filePerm))
}

func (osFS) CreateNew(name string) (File, error) {
	return wrap(os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, filePerm))
}

func (osFS) Open(name string) (File, error) { return wrap(os.Open(name)) }

func (osFS) OpenReadWrite(name string) (File, error) {
	return wrap(os.OpenFile(name, os.O_RDWR, 0))
}

func (osFS) OpenDir(name string) (File, error) { return wrap(os.Open(name)) }

func (fs osFS) ReuseForWrite(oldname, newname string) (File, error) {
	if err := os.Rename(oldname, newname); err != nil {
		return nil, err
	}
	return fs.OpenReadWrite(newname)
}

func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) RemoveAll(name string) error { return os.RemoveAll(name) }

func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

// Lock takes a flock(2) lock: released when the file is closed, by the process's exit too.
func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, filePerm)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, &os.PathError{Op: "lock", Path: name, Err: err}
	}
	return lockFile{f}, nil
}

type lockFile struct{ f *os.File }

func (l lockFile) Close() error {
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	return l.f.Close()
}
