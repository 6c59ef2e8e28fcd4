package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Workload (g): workers over HTTP, end to end. The real binary (`execstore
// serve`, built from this repository) serves a fresh data directory on
// 127.0.0.1, durable or not; producers admit executions over HTTP while
// workers in another language's shoes run them: each claims with
// acknowledge-and-claim (the previous round's outcomes and the next claim in
// one request, the executions carried with their leases, waiting on the
// server when idle), saves one step per execution, and completes it. The
// rate is executions admitted, run and completed per second, from the first
// admission to the last completion; requests per execution count the
// workers' requests alone (admission is one more, the producer's); the CPU
// of the server and of the workers (and producers) is each process's own.
//
// Two workers: a Go one on net/http, in this process with the producers, and
// the TypeScript client's Worker (clients/typescript, built with npm when
// its dist/ is missing), in a Node process of its own.

// HTTPRow is one configuration of workload (g).
type HTTPRow struct {
	Worker      string
	Durable     bool
	Executions  int
	Rate        Reps    // executions per second, end to end
	PerExec     float64 // the workers' requests per execution
	ServerCPU   Reps    // cores the server used, on average over the run
	WorkerCPU   Reps    // cores the workers used (with the producers, for the Go worker)
	ProducerCPU Reps    `json:",omitempty"` // cores the producers used, when apart from the workers
}

const (
	httpProducers   = 16
	httpConcurrency = 64 // executions a worker runs at once
	httpGoLoops     = 4  // the Go worker's claim loops, each up to httpConcurrency / httpGoLoops
)

// HTTP runs workload (g).
func (r *Runner) HTTP(ctx context.Context, executions int) error {
	repo, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(repo, "cmd", "execstore")); err != nil {
		r.Res.Notes = append(r.Res.Notes, "(g) skipped: run from bench/, in the repository (cmd/execstore not found)")
		return nil
	}
	bin := filepath.Join(r.Cfg.TempDir, fmt.Sprintf("execstore-bench-%d", os.Getpid()))
	if r.Cfg.TempDir == "" {
		bin = filepath.Join(os.TempDir(), filepath.Base(bin))
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/execstore")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("(g) building the binary: %v\n%s", err, out)
	}
	defer os.Remove(bin)
	tsWorker, note := r.typescriptWorker(ctx, repo)
	if note != "" {
		r.Res.Notes = append(r.Res.Notes, note)
	}
	for _, durable := range []bool{false, true} {
		for _, worker := range []string{"Go net/http", "TypeScript Worker"} {
			if worker == "TypeScript Worker" && tsWorker == "" {
				continue
			}
			row := HTTPRow{Worker: worker, Durable: durable, Executions: executions}
			for rep := range r.Cfg.Reps {
				run, err := r.httpRun(ctx, bin, tsWorker, worker, durable, executions)
				if err != nil {
					return fmt.Errorf("(g) %s, durable %v: %w", worker, durable, err)
				}
				row.Rate = append(row.Rate, run.rate)
				row.PerExec = run.perExec
				row.ServerCPU = append(row.ServerCPU, run.serverCPU)
				row.WorkerCPU = append(row.WorkerCPU, run.workerCPU)
				if run.producerCPU > 0 {
					row.ProducerCPU = append(row.ProducerCPU, run.producerCPU)
				}
				r.logf("(g) %s over HTTP, %s (rep %d): %.0f executions/s, %.2f requests each; CPU: server %.2f, workers %.2f, producers %.2f cores",
					worker, durability(durable), rep+1, run.rate, run.perExec, run.serverCPU, run.workerCPU, run.producerCPU)
			}
			r.Res.HTTP = append(r.Res.HTTP, row)
		}
	}
	return nil
}

func durability(durable bool) string {
	if durable {
		return "durable"
	}
	return "NoSync"
}

// typescriptWorker returns the path of the TypeScript bench worker, built if
// need be, or a note saying why there is none.
func (r *Runner) typescriptWorker(ctx context.Context, repo string) (string, string) {
	dir := filepath.Join(repo, "clients", "typescript")
	script := filepath.Join(dir, "bench", "http-worker.mjs")
	if _, err := exec.LookPath("node"); err != nil {
		return "", "(g) the TypeScript worker's rows skipped: node is not installed"
	}
	if _, err := os.Stat(filepath.Join(dir, "dist", "src", "index.js")); err != nil {
		for _, args := range [][]string{{"ci", "--no-audit", "--no-fund", "--loglevel=error"}, {"run", "build"}} {
			cmd := exec.CommandContext(ctx, "npm", args...)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", fmt.Sprintf("(g) the TypeScript worker's rows skipped: npm %s failed: %v (%s)", args[0], err, strings.TrimSpace(string(out)))
			}
		}
	}
	return script, ""
}

type httpResult struct {
	rate, perExec                     float64
	serverCPU, workerCPU, producerCPU float64
}

func (r *Runner) httpRun(ctx context.Context, bin, tsWorker, worker string, durable bool, n int) (httpResult, error) {
	srv, err := startServer(ctx, bin, r.Cfg.TempDir, durable)
	if err != nil {
		return httpResult{}, err
	}
	defer srv.stop()
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
	defer cl.CloseIdleConnections()

	serverStart, err := procCPU(srv.cmd.Process.Pid)
	if err != nil {
		return httpResult{}, err
	}
	selfStart := selfCPU()
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var requests atomic.Int64
	var completed atomic.Int64
	workerDone := make(chan error, 1)
	var node *exec.Cmd
	var nodeOut bytes.Buffer
	switch worker {
	case "Go net/http":
		for range httpGoLoops {
			go func() {
				workerDone <- goWorkerLoop(ctx, cl, srv.url, n, &completed, &requests)
			}()
		}
	default:
		node = exec.CommandContext(ctx, "node", tsWorker, srv.url, strconv.Itoa(n), strconv.Itoa(httpConcurrency))
		node.Stdout, node.Stderr = &nodeOut, os.Stderr
		if err := node.Start(); err != nil {
			return httpResult{}, err
		}
		go func() { workerDone <- node.Wait() }()
	}
	err = parallel(ctx, n, httpProducers, func(i int) error {
		body := fmt.Sprintf(`{"executionId":"h-%d","workflowId":"bench","params":{"n":%d}}`, i, i)
		_, err := post(ctx, cl, srv.url+"/v1/executions", body, http.StatusCreated)
		return err
	})
	if err != nil {
		return httpResult{}, fmt.Errorf("admitting: %w", err)
	}
	producersCPU := selfCPU() - selfStart
	if worker == "Go net/http" {
		for range httpGoLoops {
			if err := <-workerDone; err != nil {
				return httpResult{}, err
			}
		}
	} else {
		select {
		case err := <-workerDone:
			if err != nil {
				return httpResult{}, fmt.Errorf("the TypeScript worker: %w", err)
			}
		case <-time.After(10 * time.Minute):
			return httpResult{}, errors.New("the TypeScript worker did not finish in 10 minutes")
		}
	}
	elapsed := time.Since(start).Seconds()
	serverEnd, err := procCPU(srv.cmd.Process.Pid)
	if err != nil {
		return httpResult{}, err
	}
	res := httpResult{rate: float64(n) / elapsed, serverCPU: (serverEnd - serverStart) / elapsed}
	if worker == "Go net/http" {
		res.perExec = float64(requests.Load()) / float64(n)
		res.workerCPU = (selfCPU() - selfStart) / elapsed
	} else {
		var out struct {
			Completed int     `json:"completed"`
			Requests  int     `json:"requests"`
			CPU       float64 `json:"cpuSeconds"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(nodeOut.Bytes()), &out); err != nil {
			return httpResult{}, fmt.Errorf("the TypeScript worker's report %q: %w", nodeOut.String(), err)
		}
		if out.Completed != n {
			return httpResult{}, fmt.Errorf("the TypeScript worker completed %d of %d", out.Completed, n)
		}
		res.perExec = float64(out.Requests) / float64(n)
		res.workerCPU = out.CPU / elapsed
		res.producerCPU = producersCPU / elapsed
	}
	return res, nil
}

// goWorkerLoop is one claim loop of the Go worker: each round acknowledges
// what the last one ran and claims up to its share, then runs each claimed
// execution (one step save) at once. It returns once n executions were
// completed, by all loops together.
func goWorkerLoop(ctx context.Context, cl *http.Client, url string, n int, completed, requests *atomic.Int64) error {
	type ack struct {
		Lease   json.RawMessage `json:"lease"`
		Outcome json.RawMessage `json:"outcome"`
	}
	var acks []ack
	for completed.Load() < int64(n) || len(acks) > 0 {
		wait := 0
		if len(acks) == 0 {
			wait = 100
		}
		if completed.Load() >= int64(n) {
			wait = 0
		}
		body, _ := json.Marshal(map[string]any{"acknowledgements": acks, "limit": httpConcurrency / httpGoLoops,
			"leaseDurationMs": 30000, "withExecutions": true, "waitMs": wait})
		if acks == nil {
			body = bytes.Replace(body, []byte(`"acknowledgements":null`), []byte(`"acknowledgements":[]`), 1)
		}
		requests.Add(1)
		raw, err := post(ctx, cl, url+"/v1/leases/acknowledge-and-claim", string(body), http.StatusOK)
		if err != nil {
			return err
		}
		var ans struct {
			Results    []struct{ Applied bool } `json:"results"`
			Leases     []json.RawMessage        `json:"leases"`
			Executions []struct {
				Params struct{ N int } `json:"params"`
			} `json:"executions"`
		}
		if err := json.Unmarshal(raw, &ans); err != nil {
			return err
		}
		for _, res := range ans.Results {
			if res.Applied {
				completed.Add(1)
			}
		}
		acks = acks[:0]
		if completed.Load() >= int64(n) && len(ans.Leases) == 0 {
			return nil
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var first error
		for i, lease := range ans.Leases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				value := fmt.Sprintf(`{"receipt":"r-%d"}`, ans.Executions[i].Params.N)
				requests.Add(1)
				_, err := post(ctx, cl, url+"/v1/leases/steps", fmt.Sprintf(`{"lease":%s,"key":"charge","value":%s}`, lease, value), http.StatusOK)
				mu.Lock()
				defer mu.Unlock()
				if err != nil && first == nil {
					first = err
				}
				acks = append(acks, ack{Lease: lease, Outcome: json.RawMessage(`{"status":"completed","result":` + value + `}`)})
			}()
		}
		wg.Wait()
		if first != nil {
			return first
		}
	}
	return nil
}

func post(ctx context.Context, cl *http.Client, url, body string, want int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, raw)
	}
	return raw, nil
}

type benchServer struct {
	cmd  *exec.Cmd
	url  string
	data string
}

func startServer(ctx context.Context, bin, tmp string, durable bool) (*benchServer, error) {
	data, err := os.MkdirTemp(tmp, "http-")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	args := []string{"serve", "--data", data, "--addr", addr, "--log-level", "error"}
	if !durable {
		args = append(args, "--nosync")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { // pass the server's complaints on, if any
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(os.Stderr, "serve:", sc.Text())
		}
	}()
	s := &benchServer{cmd: cmd, url: "http://" + addr, data: data}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("the server at %s did not start", s.url)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *benchServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
	_ = os.RemoveAll(s.data)
}

// procCPU is a process's user and system CPU time so far, in seconds, from
// /proc (in clock ticks of 1/100 s, Linux's USER_HZ).
func procCPU(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, raw)
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, raw)
	}
	return (utime + stime) / 100, nil
}

// selfCPU is this process's user and system CPU time so far, in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
