// Package vfs is the filesystem the store keeps its directory in: an FS interface, the
// operating system's implementation (Default), and a wrapper that reports each operation to
// a function that may fail it (WithFaults).
//
// # Why an interface
//
// The store's durability rests on the order of a handful of operations: a write, then its
// fsync, then the directory's fsync when a file was created; a temporary file, its fsync, a
// rename, the directory's fsync. Tests and the crash simulator need to see those operations
// one by one: to learn what is durable at each fsync, to crash the machine between any two,
// or to make one fail. Every file the store owns (the write-ahead log's segments and side
// files, its snapshots, the directory's lock) is created, opened, written, synced, renamed
// and removed through one FS, so a single seam, Options.FS, reaches all of them; nothing in
// the storage code exists only to be observed. The default is the operating system's FS,
// and the store costs nothing for the indirection: a write and its fdatasync are one
// interface call each in front of the system call.
//
// # The shape
//
// FS and File follow Pebble's vfs package (github.com/cockroachdb/pebble/vfs), so that an
// engine built on Pebble can share the store's FS through an adapter that maps method to
// method. The differences are what this store needs and nothing more: File has Truncate
// (the log cuts a torn tail and the padding of a segment it closes) and no Seek (the log
// writes its tail with WriteAt at the offset it keeps); FS has CreateNew, which refuses an
// existing file (a segment file prepared ahead of time must be the one the log prepared);
// OpenReadWrite opens an existing file without creating it; List returns sorted names, so
// that whatever iterates a directory does so in one order on every FS; and there is no
// Preallocate, because the log prepares a segment by writing zeros, the one way that makes a
// later fsync cheap (see "Preallocated segments" in package wal). Pebble's path helpers,
// Link, disk usage and open options are left out: nothing here uses them.
//
// # Faults
//
// WithFaults wraps an FS so that a function is called with every operation that changes
// the namespace or a file (create, rename, remove, mkdir, lock, write, truncate) before it
// happens, and with every sync before it and after it succeeded; an error it returns fails
// that operation without doing it, or fails the sync after its data became durable. It
// reports operations, not intentions: the function sees what the store does to the disk,
// in the order it does it, on the goroutine that does it. That is what Pebble's errorfs
// does, with the sync reported on both sides, because a crash simulator learns what is
// durable from the syncs that completed.
package vfs
