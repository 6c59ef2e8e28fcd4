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
// The package is public, not internal, because Options.FS is: an application can only hand
// the store a filesystem of a type it can name and implement, to watch the store's I/O or to
// inject faults into it in its own tests, and an engine embedded beside the store can only
// share it through an adapter written against a type it can import.
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
// # What the store asks of an FS
//
// The store calls an FS from several goroutines: its writer writes and syncs the log, a
// snapshot is written and the log compacted on a goroutine of their own, and a replica's raft
// goroutines do the same for its log. A File is used by one goroutine at a time. Every
// operation happens inside a call the store's user made (Open, a write, Snapshot, Close) and
// in an order those calls fix, but one: the log prepares its next segment's file ahead of time
// on a goroutine of its own, when the scheduler lets it. It does so only on Default, where the
// cheaper fsync it buys is. On any other FS it prepares inline, in the write that asks for it,
// so that an FS that watches the store, or injects faults into it, sees one sequence of
// operations for one sequence of calls (see "Preallocated segments" in package wal).
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
