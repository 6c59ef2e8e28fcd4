// Command archive-eval measures the archive's engines side by side: for
// each round, a bare fdatasync loop (the floor), then each engine in a
// process of its own (so one's heap and resident memory are not the
// other's), interleaved so that the machine's load falls on all of them.
// It prints progress on stderr and the results as Markdown tables.
//
//	go run ./cmd/archive-eval -n 2000000 -rounds 2 -samples 20000
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/execstore/execstore/bench/archive"
)

type config struct {
	n, batch, samples, rounds, floorSyncs int
	engines, child, tmp                   string
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 2_000_000, "records archived")
	flag.IntVar(&c.batch, "batch", 1024, "records a batch (the store's retire command retires up to 1,024)")
	flag.IntVar(&c.samples, "samples", 50_000, "point reads timed of each kind (a tenth as many listing pages)")
	flag.IntVar(&c.rounds, "rounds", 2, "rounds, each engine once a round")
	flag.IntVar(&c.floorSyncs, "floor-syncs", 300, "syncs of the fdatasync floor, each round")
	flag.StringVar(&c.engines, "engines", engineNames(), "engines, comma-separated, in the order each round runs them")
	flag.StringVar(&c.tmp, "tmp", os.TempDir(), "where the data directories are made (and removed)")
	flag.StringVar(&c.child, "child", "", "internal: evaluate this engine in this process and print its result as JSON")
	flag.Parse()
	var err error
	if c.child != "" {
		err = child(c, os.Stdout)
	} else {
		err = parent(c, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "archive-eval:", err)
		os.Exit(1)
	}
}

func engineNames() string {
	var names []string
	for _, e := range archive.Engines {
		names = append(names, e.Name)
	}
	return strings.Join(names, ",")
}

func child(c config, out io.Writer) error {
	e, err := archive.EngineNamed(c.child)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(c.tmp, "archive-eval-"+e.Name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	res, err := archive.Evaluate(e, archive.EvalConfig{
		N: c.n, Batch: c.batch, Samples: c.samples, Dir: dir, Progress: os.Stderr,
	})
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(res)
}

// run is one engine's result in one round, with the round's floor.
type run struct {
	round      int
	floorSyncs float64 // the round's floor: syncs per second
	res        archive.EvalResult
}

func parent(c config, out io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	batchBytes := archive.BatchBytes(archive.GenerateBatch(0, c.batch))
	var runs []run
	started := time.Now()
	for round := 1; round <= c.rounds; round++ {
		floor, err := archive.Floor(c.tmp, batchBytes, c.floorSyncs)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "round %d: floor %.0f fdatasyncs/s of %d bytes appended (%s in all)\n",
			round, floor, batchBytes, time.Since(started).Round(time.Second))
		for _, name := range strings.Split(c.engines, ",") {
			var stdout bytes.Buffer
			cmd := exec.Command(self, "-child", name, "-n", strconv.Itoa(c.n), "-batch", strconv.Itoa(c.batch),
				"-samples", strconv.Itoa(c.samples), "-tmp", c.tmp)
			cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s, round %d: %w", name, round, err)
			}
			var res archive.EvalResult
			if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
				return fmt.Errorf("%s, round %d: %w", name, round, err)
			}
			runs = append(runs, run{round, floor, res})
		}
	}
	fmt.Fprintf(os.Stderr, "done in %s\n", time.Since(started).Round(time.Second))
	report(out, c, batchBytes, runs)
	return nil
}

func report(out io.Writer, c config, batchBytes int, runs []run) {
	fmt.Fprintf(out, "N = %d records, batches of %d (%d bytes of keys and values), one fdatasync each; %d samples a read\n\n",
		c.n, c.batch, batchBytes, c.samples)
	fmt.Fprintln(out, "| engine | round | ingest records/s | batches/s ÷ floor syncs/s | disk B/record ingested | settled | reopen | heap | RSS anon | RSS file |")
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range runs {
		x := r.res
		fmt.Fprintf(out, "| %s | %d | %.0f | %.2f (%.0f ÷ %.0f) | %.1f | %.1f | %.3f s | %s | %s | %s |\n",
			x.Engine, r.round, x.RecordsPerSecond,
			x.RecordsPerSecond/float64(x.Batch)/r.floorSyncs, x.RecordsPerSecond/float64(x.Batch), r.floorSyncs,
			float64(x.DiskBytesIngested)/float64(x.N), float64(x.DiskBytesSettled)/float64(x.N),
			x.ReopenSeconds, mib(x.HeapBytes), mib(x.RSSAnonBytes), mib(x.RSSFileBytes))
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| engine | round | get p50 / p99 | absent p50 / p99 | newer p50 / p99 | page by workflow p50 / p99 | page by time p50 / p99 |")
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range runs {
		x := r.res
		fmt.Fprintf(out, "| %s | %d | %s | %s | %s | %s | %s |\n", x.Engine, r.round,
			lat(x.Get), lat(x.HasAbsent), lat(x.HasNewer), lat(x.ListWorkflow), lat(x.ListTime))
	}
}

func lat(l archive.Latency) string {
	return fmt.Sprintf("%s / %s", micros(l.P50), micros(l.P99))
}

func micros(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
