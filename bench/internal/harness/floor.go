package harness

import (
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/prealloc"
	tidwall "github.com/execstore/execstore/internal/tidwall/wal"
)

// FloorWAL is the floor under execstore's write path: tidwall/wal alone, one
// WriteBatch of entries entries of size bytes each and one fsync per batch,
// for d. It returns batches per second. No framing, no checksum, no state
// machine: what is left when everything execstore adds is taken away. Its
// segments are written as execstore's are, over files of zeros prepared
// ahead of time (the first one too, before the clock starts, as a store that
// has run for a while has), and synced with fdatasync.
func FloorWAL(dir string, entries, size int, d time.Duration) (float64, error) {
	tw, err := prealloc.OpenRaw(dir, 16<<20)
	if err != nil {
		return 0, err
	}
	defer tw.Close()
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i)
	}
	var batch tidwall.Batch
	next, batches := uint64(1), 0
	start := time.Now()
	for time.Since(start) < d {
		for range entries {
			batch.Write(next, payload)
			next++
		}
		if err := tw.WriteSync(&batch); err != nil {
			return 0, err
		}
		batches++
	}
	return float64(batches) / time.Since(start).Seconds(), nil
}

// Fdatasync writes 64 bytes and fdatasyncs them, in a loop, for d, and
// returns syncs per second: the disk's own floor under any durable write,
// and the process's CPU time (user and system) per sync in µs: on some
// disks the kernel spends a large share of a sync on a core, which durable
// work on few cores pays on top of its own. Appending makes every sync
// commit the file's new size too (as a log that grows does); overwriting a
// preallocated file syncs data alone (as SQLite's reused WAL does, and
// execstore's log over its prepared segments), the cheapest durable write
// there is.
func Fdatasync(dir string, appendMode bool, d time.Duration) (perSec, cpuMicros float64, err error) {
	f, err := os.OpenFile(filepath.Join(dir, "fdatasync"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	const region = 64 << 20
	if !appendMode {
		// Zeros written: a hole made by Truncate would be allocated by the
		// writes, which is metadata again.
		if _, err := f.Write(make([]byte, region)); err != nil {
			return 0, 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, 0, err
		}
	}
	buf := make([]byte, 64)
	var off int64
	n := 0
	cpu := processCPU()
	start := time.Now()
	for time.Since(start) < d {
		if _, err := f.WriteAt(buf, off); err != nil {
			return 0, 0, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, 0, err
		}
		off = (off + 64) % region
		n++
	}
	elapsed := time.Since(start)
	return float64(n) / elapsed.Seconds(), float64(processCPU()-cpu) / float64(time.Microsecond) / float64(max(n, 1)), nil
}

// processCPU is the CPU time the process has used so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// admitBytes is the encoded size of one admission of id (no params), the
// payload execstore logs for it.
func admitBytes(id string) int {
	return len(fsm.AppendEncode(nil, &fsm.Command{Kind: fsm.KindAdmit, Now: time.Now().UnixNano(),
		ExecutionID: id, WorkflowID: "bench"}))
}

// claimAckBytes is the encoded size of one claim of k and one
// acknowledge-batch of k executions named like id: the payload execstore logs
// for k claimed and completed executions.
func claimAckBytes(k int, id string) int {
	claim := fsm.AppendEncode(nil, &fsm.Command{Kind: fsm.KindClaim, Now: time.Now().UnixNano(),
		Limit: k, Duration: int64(time.Minute)})
	acks := make([]fsm.Ack, k)
	for i := range acks {
		acks[i] = fsm.Ack{ExecutionID: id, Token: 1, Outcome: fsm.Outcome{Status: fsm.StatusCompleted}}
	}
	ack := fsm.AppendEncode(nil, &fsm.Command{Kind: fsm.KindAcknowledgeBatch, Now: time.Now().UnixNano(), Acks: acks})
	return len(claim) + len(ack)
}
