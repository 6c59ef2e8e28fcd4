// Command soak completes executions as fast as one loop can, with retention
// on, and prints every step what a store left running for months cares
// about: the live heap, the snapshot, archive and log bytes on disk, and the
// throughput; at the end, the time to reopen the store and to read an
// early execution back. Its loop is the public API's: admit 64 executions
// with caller-chosen IDs and small params, claim 64, acknowledge them in one
// batch with a small result.
//
//	go run ./cmd/soak -n 2000000 -step 500000             # with the archive
//	go run ./cmd/soak -n 2000000 -step 500000 -archive=false
//	go run ./cmd/soak -n 2000000 -step 500000 -forget 2s   # disk bounded too
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/execstore/execstore"
)

func main() {
	n := flag.Int("n", 1_000_000, "executions to complete")
	step := flag.Int("step", 250_000, "print a line every this many executions")
	archive := flag.Bool("archive", true, "retire executions to the archive (Options.Archive)")
	dir := flag.String("dir", "", "data directory (default a new temporary one, removed at the end)")
	noSync := flag.Bool("nosync", true, "Options.NoSync: measure the store, not the disk's fsync")
	retention := flag.Duration("retention", time.Millisecond, "Options.Retention")
	forget := flag.Duration("forget", 0, "Options.ForgetAfter (with the archive): forget archived executions this long after they ended; 0: never")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	verbose := flag.Bool("v", false, "log the store's snapshots, compactions and warnings on stderr")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if err := run(*n, *step, *archive, *dir, *noSync, *retention, *forget); err != nil {
		pprof.StopCPUProfile()
		log.Fatal(err)
	}
}

// logger is the store's; nil (nothing logged) unless -v.
var logger *slog.Logger

func run(n, step int, archive bool, dir string, noSync bool, retention, forget time.Duration) error {
	if n < 64 || step < 64 {
		return errors.New("soak: -n and -step must be at least 64")
	}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "execstore-soak-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	opts := execstore.Options{NoSync: noSync, Retention: retention, RetentionCheck: 50 * time.Millisecond, Archive: archive,
		ForgetAfter: forget, Logger: logger}
	s, err := execstore.Open(dir, opts)
	if err != nil {
		return err
	}
	ctx := context.Background()
	// Admission of new caller-chosen IDs on the empty store, to compare
	// with the same after the run (the archive checks each ID).
	admitEmpty, err := probeAdmissions(s, "first")
	if err != nil {
		return err
	}
	fmt.Printf("soak: %d executions, archive %v, retention %v, forget after %v, nosync %v, %s\n\n", n, archive, retention, forget, noSync, dir)
	fmt.Println("| completed | exec/s (step) | live heap | snapshots | archive | WAL | archived | in memory (retired) |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- |")
	params := json.RawMessage(`{"customer":"c-42","amount":1999}`)
	result := execstore.Completed(json.RawMessage(`{"receipt":"r-1"}`))
	acks := make([]execstore.Ack, 0, 64)
	done, stepStart := 0, time.Now()
	for done < n {
		for i := range 64 {
			id := fmt.Sprintf("order-%012d", done+i)
			if _, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "charge", Params: params}); err != nil {
				return err
			}
		}
		for claimed := 0; claimed < 64; {
			leases, err := s.ClaimDue(ctx, 64-claimed, time.Minute)
			if err != nil {
				return err
			}
			if len(leases) == 0 {
				return fmt.Errorf("soak: nothing due after %d executions", done)
			}
			acks = acks[:0]
			for _, l := range leases {
				acks = append(acks, execstore.Ack{Lease: l, Outcome: result})
			}
			res, err := s.AcknowledgeBatch(ctx, acks)
			if err != nil {
				return err
			}
			for _, r := range res {
				if r.Err != nil {
					return r.Err
				}
			}
			claimed += len(leases)
		}
		done += 64
		if done%step < 64 || done >= n {
			rate := float64(step) / time.Since(stepStart).Seconds()
			if err := report(s, dir, done, rate); err != nil {
				return err
			}
			stepStart = time.Now()
		}
	}
	// Let the retention (and the forgetting) pass for the last ones, then
	// a clean close.
	time.Sleep(max(retention, forget) + 200*time.Millisecond)
	if _, err := s.Admit(ctx, execstore.AdmitRequest{WorkflowID: "tick"}); err != nil {
		return err
	}
	if err := report(s, dir, done, 0); err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	start := time.Now()
	s, err = execstore.Open(dir, opts)
	if err != nil {
		return err
	}
	reopen := time.Since(start)
	defer s.Close()
	admitFull, err := probeAdmissions(s, "last")
	if err != nil {
		return err
	}
	fmt.Printf("\nadmission of a new caller-chosen ID, %d one at a time: empty store %s; after the run %s\n",
		probeN, admitEmpty, admitFull)
	if forget == 0 {
		gets, err := probeGets(s, done)
		if err != nil {
			return err
		}
		fmt.Printf("Get of an archived execution, %d random IDs one at a time: %s\n", probeN, gets)
	}
	start = time.Now()
	rec, err := s.Get(ctx, "order-000000000000")
	get := time.Since(start)
	if forget > 0 {
		// Forgotten: not found, and admitted again.
		_, readmit := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-000000000000", WorkflowID: "charge"})
		fmt.Printf("\nreopen %v; Get of the first execution %v (%v); its re-admission: %v\n",
			reopen.Round(time.Millisecond), get.Round(time.Microsecond), err, readmit)
		if !errors.Is(err, execstore.ErrExecutionNotFound) || readmit != nil {
			return errors.New("soak: the first execution was not forgotten")
		}
		return nil
	}
	if err != nil {
		return err
	}
	_, conflict := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-000000000000", WorkflowID: "charge"})
	fmt.Printf("\nreopen %v; Get of the first execution %v (status %s, archived %v); its re-admission: %v\n",
		reopen.Round(time.Millisecond), get.Round(time.Microsecond), rec.Status, rec.Archived, conflict)
	if !errors.Is(conflict, execstore.ErrExecutionIDConflict) {
		return errors.New("soak: the first execution's ID was admitted again")
	}
	return nil
}

// probeN is how many calls a probe times.
const probeN = 10_000

// latencies summarises timed calls.
type latencies []time.Duration

func (l latencies) String() string {
	slices.Sort(l)
	q := func(f float64) time.Duration { return l[int(f*float64(len(l)-1))].Round(100 * time.Nanosecond) }
	return fmt.Sprintf("p50 %v, p99 %v, p99.9 %v", q(0.5), q(0.99), q(0.999))
}

// probeAdmissions times probeN admissions of new caller-chosen IDs, one at a
// time, then completes them so that they leave the live set.
func probeAdmissions(s *execstore.Store, label string) (latencies, error) {
	ctx := context.Background()
	out := make(latencies, 0, probeN)
	for i := range probeN {
		start := time.Now()
		if _, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprintf("probe-%s-%06d", label, i), WorkflowID: "probe"}); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	for left := probeN; left > 0; {
		leases, err := s.ClaimDue(ctx, min(left, 1024), time.Minute)
		if err != nil {
			return nil, err
		}
		if len(leases) == 0 {
			return nil, errors.New("soak: the probe's executions are not due")
		}
		acks := make([]execstore.Ack, len(leases))
		for i, l := range leases {
			acks[i] = execstore.Ack{Lease: l, Outcome: execstore.Completed(nil)}
		}
		if _, err := s.AcknowledgeBatch(ctx, acks); err != nil {
			return nil, err
		}
		left -= len(leases)
	}
	return out, nil
}

// probeGets times probeN Gets of archived executions chosen at random among
// the first done, one at a time.
func probeGets(s *execstore.Store, done int) (latencies, error) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	out := make(latencies, 0, probeN)
	for range probeN {
		id := fmt.Sprintf("order-%012d", rng.IntN(done))
		start := time.Now()
		rec, err := s.Get(ctx, id)
		out = append(out, time.Since(start))
		if err != nil {
			return nil, err
		}
		if !rec.Archived {
			return nil, fmt.Errorf("soak: %s is not archived", id)
		}
	}
	return out, nil
}

func report(s *execstore.Store, dir string, done int, rate float64) error {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	st, err := s.Stats(context.Background())
	if err != nil {
		return err
	}
	rateText := "(settled)"
	if rate > 0 {
		rateText = fmt.Sprintf("%.0f", rate)
	}
	fmt.Printf("| %d | %s | %s | %s | %s | %s | %d | %d (%d) |\n", done, rateText, mib(m.HeapAlloc),
		mib(dirBytes(filepath.Join(dir, "snapshots"))), mib(dirBytes(filepath.Join(dir, "archive"))),
		mib(dirBytes(filepath.Join(dir, "wal"))), st.Archived, st.Executions-st.Archived, st.Retired-st.Archived)
	return nil
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// dirBytes is the size of the files under dir.
func dirBytes(dir string) uint64 {
	var n uint64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += uint64(fi.Size())
			}
		}
		return nil
	})
	return n
}
