//go:build !linux

package wal

import "os"

// execstore: fdatasync is fsync where the system has no fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }
