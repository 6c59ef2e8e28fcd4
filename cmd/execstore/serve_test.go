package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

// patience bounds every wait for something that must happen, so that a
// broken server fails the test instead of hanging it.
const patience = 10 * time.Second

// serveDataEnv, when set, makes this test binary run `execstore serve` on
// that data directory instead of the tests: TestServeStopsOnASignal starts
// it as a child process to send it signals.
const serveDataEnv = "EXECSTORE_TEST_SERVE_DATA"

// serveArgsEnv holds the child's extra serve arguments, space-separated.
const serveArgsEnv = "EXECSTORE_TEST_SERVE_ARGS"

func TestMain(m *testing.M) {
	if dir := os.Getenv(serveDataEnv); dir != "" {
		args := append([]string{"serve", "--data", dir, "--addr", "127.0.0.1:0", "--nosync"}, strings.Fields(os.Getenv(serveArgsEnv))...)
		if err := run(args, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "execstore:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// servedProcess is `execstore serve` running as a child process (this test
// binary, through TestMain) on a data directory.
type servedProcess struct {
	t       *testing.T
	cmd     *exec.Cmd
	addr    string
	mu      sync.Mutex
	logged  strings.Builder
	exited  chan struct{} // closed once waitErr is set
	waitErr error
}

// startServe starts `execstore serve --data dir --addr 127.0.0.1:0 --nosync`
// with the extra arguments, and waits until it says where it listens.
func startServe(t *testing.T, dir string, extra ...string) *servedProcess {
	t.Helper()
	p := &servedProcess{t: t, cmd: exec.Command(os.Args[0], "-test.run=^$"), exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), serveDataEnv+"="+dir, serveArgsEnv+"="+strings.Join(extra, " "))
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.logged.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := regexp.MustCompile(`"msg":"execstore: serving","addr":"([^"]+)"`).FindStringSubmatch(sc.Text()); m != nil {
				addrs <- m[1]
			}
		}
		p.waitErr = p.cmd.Wait() // after every read of the pipe
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	select {
	case p.addr = <-addrs:
	case <-p.exited:
		t.Fatalf("serve exited before serving: %v\n%s", p.waitErr, p.output())
	case <-time.After(patience):
		t.Fatalf("serve never said where it listens:\n%s", p.output())
	}
	return p
}

func (p *servedProcess) output() string { p.mu.Lock(); defer p.mu.Unlock(); return p.logged.String() }

// stop sends sig and waits for a clean exit.
func (p *servedProcess) stop(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.exited:
		if p.waitErr != nil {
			p.t.Fatalf("serve exited with %v after %v:\n%s", p.waitErr, sig, p.output())
		}
	case <-time.After(patience):
		p.t.Fatalf("serve did not stop on %v:\n%s", sig, p.output())
	}
}

// post sends a JSON body and returns the status and the answer.
func (p *servedProcess) post(path, body string) (int, string) {
	p.t.Helper()
	resp, err := http.Post("http://"+p.addr+path, "application/json", strings.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// completeOne admits id (workflow w), claims it and acknowledges it
// completed, over HTTP.
func (p *servedProcess) completeOne(t *testing.T, id string) {
	t.Helper()
	if code, body := p.post("/v1/executions", `{"executionId":"`+id+`","workflowId":"w"}`); code != http.StatusCreated {
		t.Fatalf("admit: %d %s", code, body)
	}
	code, body := p.post("/v1/claims", `{"limit":1,"leaseDurationMs":60000}`)
	token := regexp.MustCompile(`"token":(\d+)`).FindStringSubmatch(body)
	if code != http.StatusOK || token == nil {
		t.Fatalf("claim: %d %s", code, body)
	}
	if code, body := p.post("/v1/leases/acknowledge", `{"lease":{"executionId":"`+id+`","token":`+token[1]+`},"outcome":{"status":"completed"}}`); code != http.StatusOK {
		t.Fatalf("acknowledge: %d %s", code, body)
	}
}

// `execstore serve` runs until SIGINT or SIGTERM, then exits cleanly having
// closed the store: the directory opens again with what was written.
func TestServeStopsOnASignalAndClosesTheStore(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			p := startServe(t, dir)
			if code, body := p.post("/v1/executions", `{"executionId":"e","workflowId":"w"}`); code != http.StatusCreated {
				t.Fatalf("admit over HTTP: %d %s", code, body)
			}
			p.stop(sig)
			if !strings.Contains(p.output(), "shutting down") {
				t.Errorf("serve did not say it was shutting down:\n%s", p.output())
			}
			store, err := execstore.Open(dir, execstore.Options{NoSync: true})
			if err != nil {
				t.Fatalf("the store was not closed: %v", err)
			}
			defer store.Close()
			if _, err := store.Get(context.Background(), "e"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// serve takes the retention and the archive from its flags: an execution
// that ended longer ago than --retention is archived (and read back from
// there, "archived": true, and listed by GET /v1/archive), after a restart
// too. --archive without a
// retention, or a negative one, is refused before anything is opened.
func TestServeRetiresToTheArchiveWithItsFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run([]string{"serve", "-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("serve -h: %v", err)
	}
	for _, want := range []string{"-retention duration", "-archive", "-forget-after duration"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("serve -h does not list %s:\n%s", want, errOut.String())
		}
	}
	for _, args := range [][]string{{"--archive"}, {"--retention", "-1s"}, {"--retention", "1h", "--forget-after", "1h"},
		{"--retention", "1h", "--archive", "--forget-after", "1h"}, {"--retention", "1h", "--archive", "--forget-after", "-1h"}} {
		data := filepath.Join(t.TempDir(), "data")
		err := run(append([]string{"serve", "--data", data, "--addr", "127.0.0.1:0"}, args...), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), "--") {
			t.Fatalf("serve %v: %v, want it refused", args, err)
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the refused serve %v made its data directory (%v)", args, err)
		}
	}
	if err := checkRetention(time.Hour, true, 0, true); err == nil {
		t.Error("--archive on a node of a cluster was accepted")
	}

	dir := t.TempDir()
	p := startServe(t, dir, "--retention", "1ms", "--archive")
	p.completeOne(t, "e")
	archived := func(addr string) bool {
		resp, err := http.Get("http://" + addr + "/v1/executions/e")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"archived":true`)
	}
	deadline := time.Now().Add(patience)
	for !archived(p.addr) { // the retention check runs every second
		if time.Now().After(deadline) {
			t.Fatalf("the execution was not archived within %v:\n%s", patience, p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.stop(syscall.SIGTERM)
	again := startServe(t, dir) // the directory's archive opens without the flag
	if !archived(again.addr) {
		t.Fatal("after a restart, the archived execution is not read from the archive")
	}
	if code, _ := again.post("/v1/executions", `{"executionId":"e","workflowId":"w"}`); code != http.StatusConflict {
		t.Fatalf("re-admission of an archived ID over HTTP: %d", code)
	}
	for query, want := range map[string]bool{"": true, "?workflowId=w&status=completed": true, "?status=failed": false, "?workflowId=v": false} {
		resp, err := http.Get("http://" + again.addr + "/v1/archive" + query)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if listed := strings.Contains(string(b), `"executionId":"e"`); resp.StatusCode != http.StatusOK || listed != want {
			t.Fatalf("GET /v1/archive%s: %d %s; want it listed: %v", query, resp.StatusCode, b, want)
		}
	}
	again.stop(syscall.SIGTERM)
}

// With --forget-after, an archived execution is forgotten once it ended
// that long ago: its GET answers 404, and its ID is admitted again.
func TestServeForgetsArchivedExecutionsWithItsFlag(t *testing.T) {
	p := startServe(t, t.TempDir(), "--retention", "1ms", "--archive", "--forget-after", "20ms")
	p.completeOne(t, "e")
	status := func() int {
		resp, err := http.Get("http://" + p.addr + "/v1/executions/e")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(patience)
	for status() != http.StatusNotFound { // the retention check runs every second
		if time.Now().After(deadline) {
			t.Fatalf("the execution was not forgotten within %v:\n%s", patience, p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := p.post("/v1/executions", `{"executionId":"e","workflowId":"w2"}`); code != http.StatusCreated {
		t.Fatalf("admission of a forgotten ID: %d %s", code, body)
	}
	p.stop(syscall.SIGTERM)
}

// watchedListener tells when it is closed (serveUntil's shutdown has
// begun), and hands out connections that tell when the server reads past a
// request's header: its handler is then running, reading the body.
type watchedListener struct {
	net.Listener
	bodyRead chan struct{}
	closed   chan struct{}
	once     sync.Once
}

func (l *watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: c, bodyRead: l.bodyRead}, nil
}

func (l *watchedListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

type watchedConn struct {
	net.Conn
	header   []byte
	done     bool // the whole header has been read
	bodyRead chan struct{}
	once     sync.Once
}

func (c *watchedConn) Read(p []byte) (int, error) {
	if c.done {
		c.once.Do(func() { close(c.bodyRead) })
	}
	n, err := c.Conn.Read(p)
	if !c.done {
		c.header = append(c.header, p[:n]...)
		c.done = bytes.Contains(c.header, []byte("\r\n\r\n"))
	}
	return n, err
}

// A request in flight when shutdown begins is answered in full, and only
// then is the store closed: here an admission whose handler is still
// reading its body when the shutdown starts.
func TestServeDrainsARequestInFlightBeforeClosingTheStore(t *testing.T) {
	dir := t.TempDir()
	store, err := execstore.Open(dir, execstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	status, _ := sendAcrossAShutdown(t, store, "/v1/executions", `{"executionId":"drained","workflowId":"w"}`)
	if status != http.StatusCreated {
		t.Fatalf("the request in flight got %d, want 201", status)
	}
	if _, err := store.Get(context.Background(), "drained"); !errors.Is(err, execstore.ErrClosed) {
		t.Fatalf("after serveUntil the store answers %v, want ErrClosed", err)
	}
	again, err := execstore.Open(dir, execstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.Get(context.Background(), "drained"); err != nil {
		t.Fatalf("the drained admission: %v", err)
	}
}

// sendAcrossAShutdown serves store, sends a POST of body to path whose
// handler is reading its body when the server starts shutting down (the
// listener closed), finishes the body, and returns the answer's status and
// body once serveUntil has returned without an error.
func sendAcrossAShutdown(t *testing.T, store *execstore.Store, path, body string) (int, []byte) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &watchedListener{Listener: inner, bodyRead: make(chan struct{}), closed: make(chan struct{})}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- serveUntil(ctx, ln, store, slog.New(slog.DiscardHandler)) }()
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(patience):
			t.Fatalf("timed out waiting until %s", what)
		}
	}
	conn, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: execstore\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, len(body))
	if _, err := conn.Write([]byte(head + body[:10])); err != nil {
		t.Fatal(err)
	}
	wait(ln.bodyRead, "the handler reads the body")
	stop()
	wait(ln.closed, "the shutdown closes the listener")
	if _, err := conn.Write([]byte(body[10:])); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(patience))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the request in flight got no answer: %v", err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serveUntil: %v (the request held the shutdown)", err)
		}
	case <-time.After(patience):
		t.Fatal("serveUntil did not return")
	}
	return resp.StatusCode, raw
}

// serve's flags default to the README's data directory and address.
func TestServeDefaultsToTheREADMEsDataDirectoryAndAddress(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run([]string{"serve", "-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("serve -h: %v", err)
	}
	for _, want := range []string{"-data string", `(default "./execstore-data")`, "-addr string", `(default "127.0.0.1:7070")`} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("serve -h does not say %s:\n%s", want, errOut.String())
		}
	}
}

// serve takes the writer's wait for its callers from --group-wait, within
// execstore.GroupWaitMax, and says so before it opens anything.
func TestServeRefusesAGroupWaitPastItsLimit(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run([]string{"serve", "-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("serve -h: %v", err)
	}
	if !strings.Contains(errOut.String(), "-group-wait duration") {
		t.Errorf("serve -h does not list --group-wait:\n%s", errOut.String())
	}
	data := filepath.Join(t.TempDir(), "data")
	err := run([]string{"serve", "--data", data, "--addr", "127.0.0.1:0", "--group-wait", "1.5s"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "--group-wait 1.5s is more than 1s") {
		t.Fatalf("serve --group-wait 1.5s: %v, want it refused", err)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused serve made its data directory (%v)", err)
	}
}

func TestServeShutsDownCleanlyAndClosesTheStore(t *testing.T) {
	dir := t.TempDir()
	store, err := execstore.Open(dir, execstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveUntil(ctx, ln, store, slog.New(slog.DiscardHandler)) }()
	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/executions", "application/json", strings.NewReader(`{"executionId":"e","workflowId":"w"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("admit over HTTP: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serveUntil: %v", err)
	}
	// The store was closed: its directory can be opened again, and kept the admission.
	again, err := execstore.Open(dir, execstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.Get(context.Background(), "e"); err != nil {
		t.Fatal(err)
	}
}

// A claim that waits for work does not hold a shutdown: once the server
// starts shutting down, it answers at once with no leases, and serve
// returns without waiting out its drain deadline.
func TestServeAnswersAWaitingClaimWhenItShutsDown(t *testing.T) {
	store, err := execstore.Open(t.TempDir(), execstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	status, raw := sendAcrossAShutdown(t, store, "/v1/claims", `{"limit":1,"leaseDurationMs":30000,"waitMs":60000}`)
	if status != http.StatusOK || !strings.Contains(string(raw), `"leases":[]`) {
		t.Fatalf("the waiting claim answered %d %s, want 200 with no leases", status, raw)
	}
}
