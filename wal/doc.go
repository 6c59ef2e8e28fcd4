// Package wal is the store's write-ahead log: command entries framed with a version, a
// CRC-32C and their batch, appended in batches on top of github.com/tidwall/wal (as
// internal/tidwall/wal), with segment files prepared ahead of time so that an fsync writes
// data only, torn-tail repair at open, fail-stop on storage errors, front compaction that
// never holds up writes, crash-safe truncation at the back and restart of the numbering (for
// a replicated log), and a reopen that makes what it replays durable even after a failed
// fsync.
//
// # Why a frame
//
// tidwall/wal stores each entry as a uvarint length followed by the data, in segment files
// named after their first index (%020d). It keeps no checksum, accepts zero-length entries
// upstream (so a zero-filled tail decodes as many empty entries; opened Padded, as here, it
// reads zeros to the end of a file as padding instead, see below) and refuses to open when the
// last entry of the last segment is cut short. A crash in the middle of a write can therefore leave bytes
// that tidwall either rejects or silently accepts as data. Every tidwall entry written by this
// package is one frame, which lets Open and Read tell a valid entry from any other bytes:
//
//	tidwall entry:  +----------------+--------------------------------+
//	                | uvarint(28+n)  | frame (28+n bytes)             |
//	                +----------------+--------------------------------+
//
//	frame:
//	off  size  field
//	0    4     CRC-32C (Castagnoli), little-endian, over bytes [4 : 28+n)
//	4    1     format version = 1 (0 is never valid, so zero-filled bytes never decode)
//	5    1     kind = 1 (command entry); other values are invalid
//	6    2     reserved, zero
//	8    8     index (uint64 LE): this entry's log index; must equal its position in the log
//	16   4     batch position (uint32 LE): index - first index of the Write batch
//	20   4     batch length (uint32 LE): entries in that batch; >= 1 and > position
//	24   4     payload length n (uint32 LE): must equal the tidwall entry length - 28
//	28   n     payload, 1 <= n <= MaxPayloadBytes
//
//	0       4       5     6          8                16         20         24         28
//	+-------+-------+-----+----------+----------------+----------+----------+----------+---------+
//	| CRC32C| ver=1 |kind | reserved | index          | batch pos| batch len| n        | payload |
//	+-------+-------+-----+----------+----------------+----------+----------+----------+---------+
//	        |<--------------------------- covered by the CRC ------------------------------------>|
//
// The frame layout is part of the wire format. The index makes a misplaced entry detectable;
// the batch fields let Open tell which Write an entry belongs to, which the torn-tail rule
// below relies on.
//
// # Writing
//
// Write appends one Batch as consecutive entries with a single tidwall WriteBatch, then fsyncs
// the tail segment once (fdatasync on Linux: the data and the size, not the timestamps), then
// fsyncs the directory if a segment file was created, and only then returns. tidwall is
// opened with its own syncing off so that this package issues every fsync after a write, under
// Options.NoSync. Readers see an entry only after its Write has returned.
//
// tidwall creates a new segment file inside the write (when the tail segment holds more than
// SegmentSize bytes at the start of a batch, or SegmentSize bytes or more after an entry) and
// fsyncs the segment it closes, but never the directory, so the new file's name could vanish
// in a crash after the Write was acknowledged. The Log mirrors tidwall's rule, byte for byte,
// to know when a file was created, and fsyncs the directory before Write returns. A test
// compares the prediction with the directory after every Write, so a tidwall release that
// changes the rule fails loudly.
//
// # Preallocated segments
//
// An fsync after an append must commit the file's new size and its newly allocated blocks
// through the file system's journal; an fsync after overwriting blocks that are already
// allocated, written and durable only writes the data. On ext4 here the second takes about
// half as long (140 against 270 µs), and every durable Write pays one. So the log writes its
// segments over files prepared ahead of time:
//
//  1. Once the tail segment holds 1 MiB (or a quarter of a smaller SegmentSize), a goroutine
//     of the Log's writes next-segment.PREALLOC.TEMP: SegmentSize plus a slack (64 KiB, or a
//     quarter of a small segment) of zero bytes, a megabyte at a time, then fsyncs it. It
//     creates the file exclusively, and keeps it open: a file at that name it did not create
//     is never used. A log that never writes that much never prepares one.
//  2. When tidwall starts the next segment, it first cuts the padding off the segment it
//     closes (so every segment but the tail ends with its last entry, as before), fsyncs it,
//     then renames the prepared file to the new segment's name, checking that the name still
//     holds the file prepared, and writes from its start. A preparation still under way is
//     waited for (it was asked for most of a segment earlier): which segments start on
//     prepared files depends on what was written, not on timing. If none is ready (the
//     preparation failed), the segment is created empty and written by appending, as before.
//  3. A tail written by appending (a new log's first segment, one started after a failed
//     preparation, one a repair or a truncation cut, one an earlier version wrote) is left
//     early: at the first Write once it holds twice the bytes of step 1, when a prepared file
//     is ready, tidwall starts the next segment on it before the Write's entries (tidwall's
//     Cycle). Segments then vary in size; nothing needs them equal.
//  4. The tail segment's file is then its entries followed by zeros to the end, its padding.
//     Opened Padded, tidwall reads a zero byte where an entry would start as the start of the
//     padding, which must run to the end of the file (a zero byte with anything after it is
//     damage), and writes after the entries, over the padding. No entry starts with a zero
//     byte: its uvarint length is at least one, and tidwall refuses empty entries Padded.
//
// The file's durability does not change. The rename is made durable by the directory fsync
// Write already makes when a segment is created; a crash before it leaves the old segment
// whole (fsynced before the rename) and the prepared file under its own name, which Open
// removes with the other .TEMP files (earlier versions do too). A crash while a batch is
// written over the padding leaves the durable entries, then a prefix of the batch, then
// zeros or whatever the disk holds for the pages not written back: the torn-tail rule below
// applies unchanged, with zeros to the end of the file counting as padding rather than damage.
// An earlier version opening a padded segment reads its padding as a torn tail and cuts it.
//
// The preparation holds none of the log's data, so a failure in it only costs the speed-up: it
// is logged at Warn level and not tried again until the next segment starts. Close stops a
// preparation under way and removes the prepared file. NoSync logs prepare nothing.
//
// The preparation runs in the background only on the operating system's filesystem
// (vfs.Default), where the speed-up is. On any other Options.FS it runs in the writer, right
// after the Write that asks for it: every other operation of the log happens inside a call,
// in an order the calls fix, and so, then, does this one. A filesystem that observes the
// log, or injects faults into it, sees one sequence of operations for one sequence of calls,
// and the directory's contents after each Write do not depend on timing (the crash
// simulator's model follows the overwrites: a segment's durable bytes end where its entries
// do, and a crash image writes back any part of what follows).
//
// # Torn tail or corruption
//
// Open scans the last segment entry by entry, up to its padding. If an entry is incomplete or
// its frame is invalid, the bytes from that entry on are either a torn tail (a Write that never completed;
// safe to cut, as it was never acknowledged) or corruption (an acknowledged entry that was
// damaged; cutting it would lose acknowledged data, so Open refuses with a *CorruptionError).
//
// The rule: let b be the index the first bad entry should have. Open searches every byte
// offset after it for a valid entry whose batch began after b (index - batch position > b).
// If one exists the bad entry is corruption, otherwise it is a torn tail. The rule is sound
// because batches are written one at a time and each is fsynced before the next is written:
// a durable entry of a later batch proves that the batch holding b was fsynced, so its bytes
// were durable and have since been damaged. Valid entries of b's own batch prove nothing,
// since one write's pages may reach the disk in any order, and neither do stale entries with
// smaller indexes. Using b itself rather than the first index of the previous entry's batch
// matters: a batch cut short by an earlier repair leaves its prefix in the log, and the next
// batch starts right after that prefix without being "later" than the bad entry.
//
// Consecutive entries need not agree on their batch fields: a batch cut short by a repair
// leaves a prefix whose batch length promises entries that never follow, and the next batch
// starts after it.
//
// A torn tail, less the zero bytes it ends with, is copied to a side file named
// torn-<segment>-<offset>-<unix nanos>.bin in the log directory (tidwall ignores names that
// do not start with 20 digits), which is fsynced
// with its directory entry BEFORE the segment is truncated, so a wrong repair destroys
// nothing. Then the segment is truncated, fsynced, the directory is fsynced, and the repair is
// logged at Error level and reported by Log.TailRepair.
//
// Other segments are read lazily by tidwall; Read and Replay verify every frame and return a
// *CorruptionError naming the segment file, the index and the offset. The store replays the
// log after its snapshot at open, so a damaged entry there refuses to open the store.
//
// Open also checks that the segments are one contiguous run: every segment but the last must
// hold exactly next start - start entries (it walks the entry lengths of each file; the
// frames are verified when read, and so is a file whose lengths do not parse, which is
// damaged rather than missing and may lie wholly behind the caller's snapshot). Segment creation cannot leave a gap or an overlap (each new
// segment's directory entry is fsynced before its Write returns, and tidwall creates it only
// after fsyncing its predecessor whole), and neither can compaction (see below), so either is
// damage, and Open refuses it with a *CorruptionError naming the segment and the first missing
// index rather than leave it to a replay that might never read that far (entries a snapshot
// covers are not read again) or report a FirstIndex whose entry is not there.
//
// Options.NoSync drops the ordering the rule (and compaction's) relies on: after an
// operating-system crash a NoSync log may be refused as corrupt.
//
// # Fail-stop
//
// After any failed write, fsync (of a file or the directory), removal or truncation, the page
// cache and the disk may disagree, and a later fsync may report success for pages that were
// already dropped. The Log therefore refuses every later Write, CompactTo, TruncateFront,
// TruncateBack, Reset and Sync with an error wrapping ErrFailed and the original cause until it is closed and
// reopened; Open then makes what it replays durable (next section). A Write never reports
// success unless its entries were written and fsynced; an entry whose Write failed may or may
// not be present after reopening.
//
// # Reopening after an unclean stop
//
// When an fsync fails, Linux may mark the file's dirty pages clean without having written
// them. Reads in the same boot still return those bytes, but no later fsync of the file
// writes them, and a crash loses them. A log reopened in that boot would replay entries that
// are not on disk, apply them, append acknowledged entries behind them, and after a crash
// find a hole in the middle of the segment: refused as corruption, or the entries silently
// gone. The same holds after the process dies with unsynced bytes whose writeback then fails.
// So Open does not trust the page cache unless the log was closed cleanly.
//
// A clean Close, of a Log that never fail-stopped and whose final fsync of the tail segment
// (tidwall's, in Close) succeeded, leaves a file named clean-close holding "tail <segment>
// <size>\n". Open reads and removes it; the removal is made durable by the directory fsync
// Open makes before it returns, so before the first Write. The marker is not fsynced: losing
// it only costs a rewrite. Unless the marker names the current last segment with its current
// size (and unless NoSync), Open, after the torn-tail repair and before tidwall loads the
// segment, rewrites the last segment: it reads it, writes the bytes (its padding too) to
// <segment>.REWRITE.TEMP, fsyncs that file, renames it over the segment and fsyncs the
// directory. The segment is then a new file whose every byte this Open wrote and fsynced.
// A crash before the rename leaves the old segment and a *.TEMP file that the next Open
// removes; after it, the old file and the new one hold the same bytes. Either way the next
// Open, finding no marker, rewrites again. Cost: one read and one write of the last segment
// (at most SegmentSize plus one batch) and two fsyncs, only after an unclean stop. A log left
// by an earlier version has no marker, so its first Open rewrites its last segment.
//
// Only the last segment can hold bytes whose fsync never succeeded. tidwall fsyncs a segment
// before it creates the next one, and when that fsync fails it returns before creating it:
// the Write fails, the Log fail-stops, and the failed segment stays the last one until the
// next Open rewrites it. Every other segment was therefore fsynced whole, successfully, by the
// session that filled it, before any entry after it was written.
//
// Guaranteed, when Open returns without NoSync: every entry Read and Replay can return is on
// disk, with its segment's directory entry. Assumed: a successful fsync of a file reports any
// writeback error of that file since the descriptor was opened (Linux 4.13 and later), so a
// segment tidwall fsynced successfully while closing it is on disk; a read returns the bytes
// the rewrite then makes durable (if the kernel dropped the pages, the read returns what the
// disk holds, and the rewrite changes nothing); rename is atomic and a directory fsync makes
// the directory's entries durable; the device honours flushes. Not covered: damage after a
// successful fsync (the checksums catch it), and NoSync, which promises nothing.
//
// # Compaction
//
// CompactTo removes whole segment files from the front of the log; the store calls it after
// a snapshot with the first index the older kept snapshot needs. It never copies a segment
// and never holds up a Write:
//
//  1. Under the Log's lock, it picks the cut (the newest segment starting at or before
//     keepFrom), moves FirstIndex to it so that no reader starts reading a file about to go,
//     and notes the segment files before it. That is all it does under the lock.
//  2. Without the lock, for each of those files, OLDEST FIRST: rename it to
//     <segment>.DROPPED, a name that is not a segment's, then fsync the directory (unless
//     NoSync), so that it has left the log durably BEFORE the next one does. The in-memory
//     segment list is updated under the lock after each rename.
//  3. Then it frees their space: it truncates each dropped file 256 KiB at a time, pausing a
//     millisecond after each step, and deletes it. Deleting a 16 MiB file at once keeps the
//     file system busy for milliseconds, long enough to hold up a concurrent Write's fsync;
//     in small steps, a Write waits for about one step at most. Nothing here needs to be
//     durable: Open deletes any *.DROPPED file it finds.
//
// Writes only wait for the lock, never for a file operation, though the file system may
// still order a directory fsync and a Write's fsync in its journal. A crash at any instant
// leaves the segments s_j, s_j+1, ..., s_n for some j: a prefix of the files taken out,
// never a gap (which Open would refuse). Every entry from the cut on is there; the entries
// between s_j and the cut are extra and harmless; the reopened log starts at s_j, and the
// next compaction removes them. There is nothing to finish at Open but deleting dropped
// files. A storage error while taking a file out fail-stops the Log; what it took out stays
// out. A failure to delete a dropped file is only logged.
//
// tidwall keeps its own list of segments, and the removed ones stay in it until the log is
// reopened (a few dozen bytes each). It never opens them again: reads of entries at or after
// FirstIndex find them in later segments (its cached copies of removed segments cover other
// indexes), it writes, cycles, syncs and closes only the tail, which compaction never removes,
// and its own FirstIndex is read only at Open. Its TruncateFront, though, removes every file
// it lists before the cut, so TruncateFront reopens tidwall first once CompactTo removed
// files. TruncateFront at a segment start removes files as CompactTo does (and waits for the
// space to be freed); inside a segment it is tidwall's truncation (a START file holding the
// rest of the segment, written and fsynced, the older files removed, START renamed into
// place; writes wait meanwhile), followed by a directory fsync. A log holding START, END or
// TEMP files from a truncation a crash interrupted, by this version or an earlier one, is
// finished by tidwall at Open.
//
// # Truncating the back, and restarting the numbering
//
// A replicated log changes its end as well as its front: a follower removes the entries a new
// leader does not have (TruncateBack), and after installing a snapshot it continues at the
// snapshot's index + 1, wherever its own log ended (Reset: the log is emptied and the next
// Write appends the index given). Both are rare, so they take the simple path: every other
// operation waits (the Log's locks, readers included) while tidwall is closed, the files
// are changed, and tidwall is opened again on them.
//
// Each step leaves a log that Open accepts and that holds only entries as they were written:
//
//   - TruncateBack(index) takes the segment files starting after index out of the log NEWEST
//     first, each by a rename to <segment>.DROPPED made durable by a directory fsync before
//     the next (a crash leaves a prefix of the segments: contiguous), then truncates the
//     segment holding index right after it and fsyncs the file (a crash leaves it whole or
//     cut). Every state in between holds the entries from FirstIndex to some k between
//     index and the old LastIndex, unchanged; the caller repeats the truncation. Emptying
//     the log (index FirstIndex()-1) keeps the first segment, cut to nothing, so that its
//     name still says where the numbering continues.
//   - Reset(next) takes every segment but the tail out OLDEST first (a crash leaves a
//     suffix: contiguous), cuts the tail to nothing and fsyncs it (an empty log numbered
//     from the tail's start), then renames it after next and fsyncs the directory (an
//     empty log numbered from next).
//
// A cut at the back removes the entries' bytes from the file, durably, BEFORE any later
// Write reuses their indexes, so the torn-tail rule stays sound: the bytes after a bad entry
// can only belong to its own batch or later ones, never to an older batch whose entries held
// the same indexes. The segment holding index must parse up to it; if it does not, the
// truncation is refused with a *CorruptionError and changes nothing. A storage error
// fail-stops the Log as any other; tidwall is opened again on what was left, so that reads
// of the entries kept go on until the Log is closed.
//
// # Limits
//
// A payload holds 1 to MaxPayloadBytes (64 MiB) bytes; a batch holds at most MaxBatchEntries
// (65536) entries and MaxBatchBytes (256 MiB) of payload. Open never trusts a length beyond
// what the segment file holds.
package wal
