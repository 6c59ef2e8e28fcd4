// Package harness runs execstore and the systems people would use instead of
// it through the same workloads, on the same machine, in the same run, and
// writes what it measured as a Markdown report with charts.
//
// Every contender is a System: it admits executions by ID, fills itself with
// pending executions for setup (untimed), claims and completes them with the
// system's own claim and completion statements, and runs its own worker loop
// for the end-to-end and duplicate-storm workloads. The workloads
// (workloads.go) only ever talk to that interface, so every contender is
// measured by the same code, with the same clocks and the same percentiles.
//
// Setup never leaks into a timed run: an execstore fill waits for a snapshot
// its admissions started before the run begins (a snapshot the workload's
// own commands bring still falls where it falls), and the floor under
// admission runs right after each repetition it is compared with, at the
// batch size that repetition reached, so the report's ratio is a median of
// interleaved pairs.
//
// Durability is the same for every durable row: execstore fsyncs each WAL
// batch, PostgreSQL runs with fsync=on and synchronous_commit=on, SQLite runs
// in WAL mode with synchronous=FULL. NoSync rows say so in their name.
package harness
