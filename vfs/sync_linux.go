package vfs

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data and the metadata needed to read it back (its size), not its
// timestamps.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
