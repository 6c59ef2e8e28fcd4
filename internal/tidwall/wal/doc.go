// Package wal is github.com/tidwall/wal v1.2.1 (MIT licence, LICENSE beside
// this file), the log under execstore's own wal package, with one change:
// the tail segment's in-memory buffers grow fourfold up to the segment's
// size instead of by append's quarter at a time (writeBatch and tailCap,
// marked "execstore:"). Upstream, every byte logged cost about five bytes
// allocated as the buffer holding the tail segment's entries was copied into
// one a quarter larger, again and again up to the segment size: under a
// stream of admissions, about two thirds of all the bytes the store
// allocated, and with them most of the collector's cycles. Here it is under
// two, the entries' positions included (TestWritingAllocatesAboutWhatItLogs,
// which fails on the upstream code).
//
// Nothing else differs but the deprecated io/ioutil calls, replaced by their
// os equivalents, and one upstream test (TestIssue33) that now removes the
// directory it creates in the source tree. The file format, the API and
// upstream's own tests (wal_test.go) are unchanged, so a newer upstream
// release can be taken by copying its wal.go and wal_test.go over these and
// applying the marked changes again.
package wal

// Upstream names the release this package is taken from, for reports that
// list the versions of what they ran.
const Upstream = "github.com/tidwall/wal v1.2.1"
