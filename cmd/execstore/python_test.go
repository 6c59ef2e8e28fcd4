package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

// The HTTP story of docs/http.md, from outside Go: examples/python/worker.py,
// on the Python client (clients/python, the standard library alone),
// triggers (and triggers again) and runs a Worker that claims, saves a step
// and acknowledges, against the real binary. CI installs python3; elsewhere
// the test skips without it.
func TestThePythonWorkerRunsAgainstTheBinary(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is not installed; .ci/run installs it")
		}
		t.Skip("python3 is not installed")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "execstore")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data")
	serve := exec.Command(bin, "serve", "--data", data, "--addr", "127.0.0.1:0", "--nosync")
	stderr, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := regexp.MustCompile(`"msg":"execstore: serving","addr":"([^"]+)"`).FindStringSubmatch(sc.Text()); m != nil {
				addrs <- m[1]
			}
		}
		exited <- serve.Wait() // after every read of the pipe
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			serve.Process.Kill()
			<-exited
		}
	})
	var addr string
	select {
	case addr = <-addrs:
	case err := <-exited:
		stopped = true
		t.Fatalf("serve exited before serving: %v", err)
	case <-time.After(patience):
		t.Fatal("serve never said where it listens")
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "../../examples/python/worker.py", "http://"+addr, "order-7").CombinedOutput()
	if err != nil {
		t.Fatalf("worker.py: %v\n%s", err, out)
	}
	want := strings.Join([]string{
		"trigger order-7: admitted",
		"trigger order-7 again: 409 EXECUTION_ID_CONFLICT sameEvent=true",
		`ran order-7 (delivery 1): step charge kept {"receipt":"r-order-7"}`,
		"acknowledged order-7: completed",
		`outcome of order-7: completed {"receipt":"r-order-7"}`,
	}, "\n") + "\n"
	if string(out) != want {
		t.Fatalf("worker.py printed:\n%s\nwant:\n%s", out, want)
	}

	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("serve exited with %v", err)
		}
	case <-time.After(patience):
		t.Fatal("serve did not stop on SIGTERM")
	}
	store, err := execstore.Open(data, execstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rec, err := store.Get(context.Background(), "order-7")
	if err != nil {
		t.Fatal(err)
	}
	// Kept byte for byte, as Python's json.dumps wrote them.
	if rec.Status != execstore.StatusCompleted || string(rec.Outcome.Result) != `{"receipt": "r-order-7"}` ||
		string(rec.Params) != `{"order": 7, "total": 16}` || rec.Context["tenant"] != "shop" || rec.Attempts != 1 {
		t.Fatalf("the record after the worker: %+v", rec)
	}
	step, ok, err := store.Step(context.Background(), "order-7", "charge")
	if err != nil || !ok || string(step) != `{"receipt": "r-order-7"}` {
		t.Fatalf("the saved step: %s %v %v", step, ok, err)
	}
	if st, _ := store.Stats(context.Background()); st.Executions != 1 {
		t.Fatalf("the duplicate trigger admitted a second execution: %+v", st)
	}
}
