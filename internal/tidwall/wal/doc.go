// Package wal is github.com/tidwall/wal v1.2.1 (MIT licence, LICENSE beside
// this file), the log under execstore's own wal package, with two changes,
// each marked "execstore:".
//
// The tail segment's in-memory buffers grow fourfold up to the segment's
// size instead of by append's quarter at a time (writeBatch and tailCap).
// Upstream, every byte logged cost about five bytes allocated as the buffer
// holding the tail segment's entries was copied into one a quarter larger,
// again and again up to the segment size: under a stream of admissions,
// about two thirds of all the bytes the store allocated, and with them most
// of the collector's cycles. Here it is under two, the entries' positions
// included (TestWritingAllocatesAboutWhatItLogs, which fails on the upstream
// code).
//
// Padded segments (Options.Padded and Options.NewSegment): a segment file may
// end in zero bytes that hold no entry, its padding, which the log writes its
// next entries over instead of appending after them; NewSegment creates each
// new segment's file, which may come full of zeros, written and fsynced ahead
// of time, so that an fsync after a write need only write the data, not a new
// size and new blocks (execstore's internal/prealloc prepares them). A zero
// byte where an entry would start begins the padding, which must run to the
// end of the file; empty entries are refused, since they would read back as
// padding. Opening a log, the tail is written from the end of its entries;
// starting a new segment, the one it closes is cut to its entries first, so
// only the tail is ever padded. Sync uses the file's SyncData (fdatasync on
// Linux) when Padded. Without Padded every byte is read as upstream reads it
// (TestUnpaddedZerosAreEmptyEntries). TailSize reports how many bytes the
// tail segment's entries take; Cycle starts the next segment at once, so that
// a tail written by appending can be left for a prepared file.
//
// Files through a filesystem (Options.FS, execstore's vfs package): every
// file the log creates, opens, renames, removes, reads, writes or syncs goes
// through it, so that the store's tests and crash simulator see (and may
// fail) each of those operations. The tail segment is written with WriteAt at
// the position upstream's Write and Seek kept, so that a file needs no Seek;
// the directory is listed with the FS's List, a directory among its entries
// told apart by a Stat.
//
// Nothing else differs but the deprecated io/ioutil calls, replaced by their
// os equivalents, and one upstream test (TestIssue33) that now removes the
// directory it creates in the source tree. The upstream file format, the API
// and upstream's own tests (wal_test.go) are unchanged, so a newer upstream
// release can be taken by copying its wal.go and wal_test.go over these and
// applying the marked changes again.
package wal

// Upstream names the release this package is taken from, for reports that
// list the versions of what they ran.
const Upstream = "github.com/tidwall/wal v1.2.1"
