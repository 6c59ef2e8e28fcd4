package archive

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EvalConfig is one engine's evaluation.
type EvalConfig struct {
	N        int       // records archived
	Batch    int       // records a batch: one retire command's
	Samples  int       // point reads timed of each kind; a tenth as many pages of each listing
	Dir      string    // an empty directory for the archive
	Progress io.Writer // where progress lines go; nil for none
}

// PageRecords is a listing page's size.
const PageRecords = 100

// Latency is a timed operation's median and 99th percentile.
type Latency struct{ P50, P99 time.Duration }

// EvalResult is what one engine measured at N records.
type EvalResult struct {
	Engine            string
	N, Batch          int
	IngestSeconds     float64
	RecordsPerSecond  float64 // ingest, one synced batch at a time
	DiskBytesIngested int64   // blocks the directory holds right after the last batch
	QuietSeconds      float64 // until the engine's background work ended; the reads wait for it
	DiskBytesSettled  int64   // after Settle and Close
	Get               Latency // a present ID, uniformly drawn
	HasAbsent         Latency // an absent ID among present ones
	HasNewer          Latency // an absent ID greater than every archived one: a new order
	ListWorkflow      Latency // a page of 100 of one workflow, from a random time
	ListTime          Latency // a page of 100 of all workflows, from a random time
	ReopenSeconds     float64 // Close, then Open, before Settle
	HeapBytes         uint64  // HeapAlloc after runtime.GC, the archive open at N, after the reads
	RSSAnonBytes      uint64  // resident anonymous memory then (the heap, caches outside it)
	RSSFileBytes      uint64  // resident file-backed memory then (bbolt's mmap)
}

// Evaluate archives cfg.N generated records with e, waits for the engine's
// background work to end, then times its reads, a reopen and its settling,
// checking every answer on the way.
func Evaluate(e Engine, cfg EvalConfig) (EvalResult, error) {
	res := EvalResult{Engine: e.Name, N: cfg.N, Batch: cfg.Batch}
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "%s: "+format+"\n", append([]any{e.Name}, args...)...)
		}
	}
	a, err := e.Open(cfg.Dir)
	if err != nil {
		return res, err
	}
	defer func() {
		if a != nil {
			a.Close()
		}
	}()
	if err := ingest(a, cfg, &res, progress); err != nil {
		return res, err
	}
	if res.DiskBytesIngested, err = DiskBytes(cfg.Dir); err != nil {
		return res, err
	}
	start := time.Now()
	for a.Busy() && time.Since(start) < time.Minute {
		time.Sleep(10 * time.Millisecond)
	}
	res.QuietSeconds = time.Since(start).Seconds()
	progress("quiet %.1fs after the last batch; timing reads", res.QuietSeconds)
	if err := timeReads(a, cfg, &res); err != nil {
		return res, err
	}
	progress("reads timed: get p99 %v, absent p99 %v", res.Get.P99, res.HasAbsent.P99)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapBytes = ms.HeapAlloc
	res.RSSAnonBytes, res.RSSFileBytes = rss()

	err = a.Close()
	a = nil
	if err != nil {
		return res, err
	}
	start = time.Now()
	if a, err = e.Open(cfg.Dir); err != nil {
		return res, err
	}
	res.ReopenSeconds = time.Since(start).Seconds()
	if err := checkGet(a, cfg.N-1); err != nil {
		return res, fmt.Errorf("after reopen: %w", err)
	}
	progress("reopened in %.3fs; settling", res.ReopenSeconds)
	if err := a.Settle(); err != nil {
		return res, err
	}
	err = a.Close()
	a = nil
	if err != nil {
		return res, err
	}
	res.DiskBytesSettled, err = DiskBytes(cfg.Dir)
	return res, err
}

func ingest(a Archive, cfg EvalConfig, res *EvalResult, progress func(string, ...any)) error {
	var took time.Duration
	next := time.Now().Add(5 * time.Second)
	for first := 0; first < cfg.N; first += cfg.Batch {
		recs := GenerateBatch(first, min(cfg.Batch, cfg.N-first))
		start := time.Now()
		if err := a.Put(recs); err != nil {
			return err
		}
		took += time.Since(start) // generating the records is not the engine's time
		if now := time.Now(); now.After(next) {
			next = now.Add(5 * time.Second)
			done := first + len(recs)
			progress("%d/%d archived, %.0f records/s", done, cfg.N, float64(done)/took.Seconds())
		}
	}
	res.IngestSeconds = took.Seconds()
	res.RecordsPerSecond = float64(cfg.N) / took.Seconds()
	progress("ingested %d in %.1fs: %.0f records/s", cfg.N, took.Seconds(), res.RecordsPerSecond)
	return nil
}

func checkGet(a Archive, i int) error {
	want := GenerateRecord(i)
	got, ok, err := a.Get(want.ID)
	if err != nil {
		return err
	}
	if !ok || got.ID != want.ID || got.Outcome != want.Outcome || got.UpdatedAtNanos != want.UpdatedAtNanos {
		return fmt.Errorf("archive: Get(%q) = %+v, %v; want %+v", want.ID, got, ok, want)
	}
	return nil
}

// timeReads times each kind of read on its own, the same seeded draws for
// every engine, and checks each answer.
func timeReads(a Archive, cfg EvalConfig, res *EvalResult) error {
	rng := rand.New(rand.NewPCG(uint64(cfg.N), 34))
	var err error
	timed := func(n int, op func() error) Latency {
		d := make([]time.Duration, 0, n)
		for range n {
			start := time.Now()
			if err == nil {
				err = op()
			}
			d = append(d, time.Since(start))
		}
		return percentiles(d)
	}
	res.Get = timed(cfg.Samples, func() error { return checkGet(a, rng.IntN(cfg.N)) })
	res.HasAbsent = timed(cfg.Samples, func() error { return checkAbsent(a, AbsentID(rng.IntN(cfg.N))) })
	res.HasNewer = timed(cfg.Samples, func() error { return checkAbsent(a, ArchivedID(cfg.N+rng.IntN(cfg.N))) })
	from, to := WorkloadSpanNanos(cfg.N)
	page := func(workflow string) func() error {
		return func() error {
			q := Query{WorkflowID: workflow, FromNanos: from + rng.Int64N(to-from)/2, ToNanos: to, Limit: PageRecords}
			recs, err := a.List(q)
			if err == nil && len(recs) != PageRecords && cfg.N >= 100*PageRecords {
				err = fmt.Errorf("archive: a page from the first half of the span has %d records", len(recs))
			}
			return err
		}
	}
	pages := max(cfg.Samples/10, 1)
	res.ListWorkflow = timed(pages, func() error { return page(Workflows[rng.IntN(len(Workflows))].ID)() })
	res.ListTime = timed(pages, page(""))
	return err
}

func checkAbsent(a Archive, id string) error {
	ok, err := a.Has(id)
	if err == nil && ok {
		err = fmt.Errorf("archive: Has(%q) = true for an ID never archived", id)
	}
	return err
}

func percentiles(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(int(q*float64(len(d))), len(d)-1)] }
	return Latency{P50: at(0.50), P99: at(0.99)}
}

// DiskBytes is what the files under dir occupy on the disk: their
// allocated blocks, not their lengths (a file grown ahead of its use holds
// fewer blocks than its length).
func DiskBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		} else {
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// rss returns the process's resident anonymous and file-backed bytes, or
// zeros where /proc does not tell.
func rss() (anon, file uint64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "RssAnon" && name != "RssFile") {
			continue
		}
		kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if name == "RssAnon" {
			anon = kb << 10
		} else {
			file = kb << 10
		}
	}
	return anon, file
}

// Floor appends batchBytes to a file in dir and fdatasyncs it, syncs
// times, and returns the syncs per second: what the disk allows an engine
// that wrote a batch once and synced it.
func Floor(dir string, batchBytes, syncs int) (float64, error) {
	f, err := os.CreateTemp(dir, "floor-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, batchBytes)
	for i := range buf {
		buf[i] = byte(mix(uint64(i)))
	}
	start := time.Now()
	for range syncs {
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, err
		}
	}
	return float64(syncs) / time.Since(start).Seconds(), nil
}
