// Package faults holds the fault hooks that this project's storage code
// (snapshot files, replication's stable store) calls around each write and
// fsync, so that tests and the crash simulator can inject storage errors and
// learn what is durable at each step. A nil *Hooks, or a nil func in it,
// injects nothing.
package faults
