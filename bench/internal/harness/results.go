package harness

// Results is everything one run measured.
type Results struct {
	FdatasyncAppend    Reps // append + fdatasync per second on the disk the stores use
	FdatasyncOverwrite Reps // overwrite in place + fdatasync per second
	// FdatasyncCPU is the process's CPU time per overwrite + fdatasync, in
	// µs (user and system: the kernel's share of a sync on a core).
	FdatasyncCPU Reps `json:",omitempty"`
	Admission    []AdmissionRow
	Claim        []ClaimRow
	Scale        []ScaleRow
	E2E          []E2ERow
	Storm        []StormRow
	HTTP         []HTTPRow `json:",omitempty"`
	Profiles     []Profile
	Notes        []string // what was skipped, and why
}

// AdmissionRow is workload (a): admissions per second.
type AdmissionRow struct {
	System    string
	Producers int
	Batch     int  // executions per call: 1, or a batch for a peer that offers one
	Rate      Reps // executions admitted per second
	// For execstore: the commands its group commit put in each WAL batch,
	// and the floor (raw tidwall/wal) at that batch size, in entries/s,
	// each run right after a repetition of Rate; OfFloor is each pair's
	// Rate ÷ Floor.
	PerBatch float64
	Floor    Reps
	OfFloor  Reps
}

// ClaimRow is workload (b): executions claimed and completed per second.
type ClaimRow struct {
	System   string
	Pending  int
	Claimers int
	Limit    int
	// Chained: each claimer completed the batch it ran and claimed the next
	// in one call (a Chainer's chain); otherwise it claimed, then completed,
	// in two calls (ClaimComplete).
	Chained bool
	Rate    Reps
	// For execstore: executions per WAL batch (one fsync), entries per batch,
	// and the floor at that batch size in executions per second.
	ExecPerBatch    float64
	EntriesPerBatch float64
	Floor           Reps
}

// ScaleRow is workload (e): one point of the scale curve.
type ScaleRow struct {
	System   string
	Pending  int
	Rate     Reps    // executions claimed and completed per second (claim, then complete)
	PerRec   float64 // bytes per record (SizeKind says of what)
	SizeKind string
	Reopen   Reps // seconds to reopen (execstore: snapshot + log recovery)
	FillSecs float64
	// ChainedRate is Rate's configuration chained (one call per round);
	// empty for a contender that does not chain.
	ChainedRate Reps
}

// E2ERow is workload (c): trigger -> no-op -> completed through the
// system's own worker loop.
type E2ERow struct {
	System     string
	Offered    int  // triggers per second; 0 means flat out (4,096 in flight)
	Throughput Reps // completions per second
	P50        Reps // latency in seconds, trigger (scheduled time) to completion
	P99        Reps
	P999       Reps
	Lag99      Reps // p99 of how late the producers issued triggers (included in the latencies)
	Issued     int  // triggers issued in the last run
	Completed  int  // of which completed before the wait ended
}

// StormRow is workload (d): a duplicate-trigger storm.
type StormRow struct {
	System   string
	Triggers int
	IDs      int
	Refused  int // triggers the system refused as repeats
	Runs     int // times the no-op body ran
	RanTwice int // executions whose body ran more than once
}
