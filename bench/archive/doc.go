// Package archive measures two storage engines as the archive of retired
// executions: github.com/cockroachdb/pebble/v2, an LSM tree, and
// go.etcd.io/bbolt, a copy-on-write B+tree, each behind the same small
// Archive interface and fed the same records in the same batches.
//
// The workload is the one the store would give an archive. The writer hands
// it the records one retire command removed from the state machine (1,024 of
// them at most, in (updatedAt, ID) order), written as one batch and synced
// before the snapshot that no longer holds them. Reads are a point Get of an
// archived ID (Get and Await of an execution that has left memory), an
// exists-check of an ID that is almost always absent (admission's precheck of
// a caller-chosen ID), and a page of 100 records by workflow or by time range
// (an operator looking for last month's failures).
//
// A record is keyed by its execution ID; its value is the compact binary
// encoding below. Two index entries, written in the same batch and holding
// no value, list it: (workflow, updatedAt, ID) and (updatedAt, ID).
//
//	record value, format version 1 (the ID is the key and is not repeated):
//
//	+---------+--------+-------+------------------+-----------------+
//	| version | status | flags | uvarint len, wf  | varint admitted |
//	|   1 B   |  1 B   |  1 B  |   workflow ID    |   (unix nanos)  |
//	+---------+--------+-------+------------------+-----------------+
//	| uvarint updated - admitted | uvarint deliveries |
//	+----------------------------+--------------------+
//	| uvarint len, outcome | [flags&1: uvarint len, parent ID; uvarint len, step key] |
//	+----------------------+-----------------------------------------------------------+
//
//	index keys (big-endian times, sign bit flipped, so bytes sort as times):
//
//	by workflow: uvarint len, workflow ID | 8 B updatedAt | ID
//	by time:     8 B updatedAt | ID
//
// The measurement is cmd/archive-eval (each engine in a process of its own,
// the engines interleaved, with a bare fdatasync loop as the floor); the
// tests check that both implementations answer the same, and the benchmarks
// give the same operations to testing.B:
//
//	cd bench/archive && go run ./cmd/archive-eval -n 2000000 -rounds 2 -samples 20000
//	cd bench/archive && go test -run '^$' -bench . -benchmem
//
// It is a module of its own so that neither engine enters the library's
// go.mod until one is chosen.
package archive
