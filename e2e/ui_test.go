// Package e2e drives `execstore serve` and its web view in a real browser.
// It is its own module so that the browser driver never enters the
// library's go.mod; .ci/run installs Debian's chromium and runs it.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

const token = "e2e-token-0123456789abcdef"

// screenshotsEnv names a directory that also receives the screenshots (those
// in docs/ come from there).
const screenshotsEnv = "EXECSTORE_SCREENSHOTS"

// browser returns the path of a Chromium the test can drive, or "".
func browser() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// An operator opens the web view, gives the token, filters the list to
// failed executions, opens one and reads its error chain, cancels a
// suspended execution and sees it turn cancelled, then pauses a queue and
// resumes it from the queues page.
func TestAnOperatorFindsAFailureAndCancelsASuspendedExecutionInTheBrowser(t *testing.T) {
	chrome := browser()
	if chrome == "" {
		t.Skip("no chromium binary on PATH (Debian: apt-get install chromium; .ci/run installs it)")
	}
	base := startServe(t)
	failed, suspended := seed(t, base)

	shots := t.TempDir()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(1360, 900))...)
	defer cancelAlloc()
	browserCtx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	if err := chromedp.Do(browserCtx); err != nil { // starts the browser, without a timeout (see chromedp.Run)
		t.Fatalf("starting %s: %v", chrome, err)
	}
	ctx, cancel := context.WithTimeout(browserCtx, 60*time.Second)
	defer cancel()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	shoot := func(name string) []byte {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		for _, dir := range []string{shots, os.Getenv(screenshotsEnv)} {
			if dir == "" {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return png
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }

	// The token, once: the shell asks for it and keeps it in the tab.
	do("open the list and give the token",
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(css("#login-token")),
		chromedp.SendKeys(css("#login-token"), token),
		chromedp.Click(css("#login-submit")),
		chromedp.WaitVisible(css("table.list tbody tr td.id a")),
		chromedp.WaitVisible(css(".cards .card.s-failed")),
	)
	listShot := shoot("list.png")

	do("filter to failed",
		chromedp.SetValue(css("select[name=status]"), "failed"),
		chromedp.Click(css("#filter-submit")),
		chromedp.WaitVisible(css(`main[data-loaded="/ui/?status=failed"] table.list`)),
	)
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.list tbody tr .badge")].map(b => b.textContent)`))
	if err != nil {
		t.Fatal(err)
	}

	do("open the failed record", chromedp.Click(css("table.list tbody tr td.id a")), chromedp.WaitVisible(css("ol.chain")))
	chain, err := chromedp.Run(ctx, chromedp.Text(css("ol.chain")))
	if err != nil {
		t.Fatal(err)
	}
	recordShot := shoot("record.png")

	do("cancel the suspended execution through the confirmation",
		chromedp.Navigate(base+"/ui/executions/"+suspended),
		chromedp.WaitVisible(css("button[data-cancel]")),
		chromedp.Click(css("button[data-cancel]")),
		chromedp.WaitVisible(css("#confirm-cancel")),
		chromedp.Click(css("#cancel-confirm")),
		chromedp.WaitVisible(css(".record-head .badge.s-cancelled")),
	)
	head, err := chromedp.Run(ctx, chromedp.Text(css(".record-head")))
	if err != nil {
		t.Fatal(err)
	}
	cancelledShot := shoot("cancelled.png")

	do("pause the charge-order queue through the confirmation",
		chromedp.Navigate(base+"/ui/queues"),
		chromedp.WaitVisible(css(`tr[data-queue="charge-order"] button[data-queue-pause="true"]`)),
		chromedp.Click(css(`tr[data-queue="charge-order"] button[data-queue-pause="true"]`)),
		chromedp.WaitVisible(css("#confirm-queue")),
		chromedp.Click(css("#queue-confirm")),
		chromedp.WaitVisible(css(`tr[data-queue="charge-order"] .badge.s-paused`)),
	)
	queuesShot := shoot("queues.png")
	var queue struct {
		Paused   bool
		KeyLimit int    `json:"keyLimit"`
		KeyMode  string `json:"keyMode"`
	}
	call(t, base, "GET", "/v1/queues/charge-order", nil, &queue)
	if !queue.Paused {
		t.Errorf("the API says charge-order is not paused after the web view paused it")
	}
	do("resume it",
		chromedp.Click(css(`tr[data-queue="charge-order"] button[data-queue-pause="false"]`)),
		chromedp.WaitVisible(css("#confirm-queue")),
		chromedp.Click(css("#queue-confirm")),
		chromedp.WaitVisible(css(`tr[data-queue="charge-order"] .badge.s-running`)),
	)
	call(t, base, "GET", "/v1/queues/charge-order", nil, &queue)
	if queue.Paused {
		t.Errorf("the API says charge-order is paused after the web view resumed it")
	}
	if queue.KeyLimit != 1 || queue.KeyMode != "live" {
		t.Errorf("pausing and resuming from the web view changed the key limit to %d (%q)", queue.KeyLimit, queue.KeyMode)
	}

	if len(rows) == 0 {
		t.Fatal("the failed filter shows no rows")
	}
	for _, r := range rows {
		if r != "failed" {
			t.Errorf("the failed filter shows a %q execution", r)
		}
	}
	for _, want := range []string{"card declined", "CARD_DECLINED", "caused by", "issuer unavailable"} {
		if !strings.Contains(chain, want) {
			t.Errorf("the error chain of %s lacks %q:\n%s", failed, want, chain)
		}
	}
	if !strings.Contains(head, "cancelled") || strings.Contains(head, "Cancel…") {
		t.Errorf("after the cancellation the record's head reads %q", head)
	}
	var rec struct{ Status string }
	call(t, base, "GET", "/v1/executions/"+suspended, nil, &rec)
	if rec.Status != "cancelled" {
		t.Errorf("the API says %s is %q after the cancellation", suspended, rec.Status)
	}
	for name, b := range map[string][]byte{"list": listShot, "record": recordShot, "cancelled": cancelledShot, "queues": queuesShot} {
		if len(b) < 1000 {
			t.Errorf("the %s screenshot has %d bytes", name, len(b))
		}
	}
	t.Logf("screenshots in %s", shots)
}

// startServe builds the binary, starts `serve` with a token on a free
// loopback port and waits until it answers.
func startServe(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "execstore")
	build := exec.Command("go", "build", "-o", bin, "./cmd/execstore")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "serve", "--data", filepath.Join(dir, "data"), "--addr", addr, "--nosync", "--token-file", tokenFile)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if t.Failed() {
			t.Logf("serve's log:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer /healthz: %v\n%s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a process that is starting, bounded above
	}
}

// call sends a JSON request with the token and decodes the answer into out.
func call(t *testing.T, base, method, path string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// seed fills the store as a small shop's would look: orders charged,
// failed, waiting for payment and queued, e-mails sent, a nightly schedule.
// It returns the ID of a failed execution and of a suspended one.
func seed(t *testing.T, base string) (failed, suspended string) {
	t.Helper()
	type lease struct {
		ExecutionID string    `json:"executionId"`
		Token       uint64    `json:"token"`
		ExpiresAt   time.Time `json:"expiresAt"`
	}
	admit := func(id, wf, params string) {
		call(t, base, "POST", "/v1/executions", map[string]any{
			"executionId": id, "workflowId": wf, "params": json.RawMessage(params),
			"context": map[string]string{"tenant": "acme", "trigger": "checkout"},
		}, nil)
	}
	for i := 1; i <= 9; i++ {
		admit(fmt.Sprintf("order-%d", 40+i), "charge-order", fmt.Sprintf(`{"order":%d,"amount":%d.50,"currency":"EUR"}`, 40+i, 10+i*3))
	}
	for i := 1; i <= 4; i++ {
		admit(fmt.Sprintf("mail-%d", i), "send-receipt", fmt.Sprintf(`{"order":%d,"to":"customer%d@example.com"}`, 40+i, i))
	}
	var claimed struct{ Leases []lease }
	call(t, base, "POST", "/v1/claims", map[string]any{"limit": 10, "leaseDurationMs": 600000}, &claimed)
	for i, l := range claimed.Leases {
		outcome := map[string]any{"status": "completed", "result": json.RawMessage(`{"receipt":"r-` + l.ExecutionID + `"}`)}
		switch i % 5 {
		case 1:
			outcome = map[string]any{"status": "failed", "error": map[string]any{
				"name": "*payments.DeclinedError", "message": "charge order: card declined: issuer unavailable", "code": "CARD_DECLINED",
				"cause": map[string]any{"name": "*net.OpError", "message": "issuer unavailable", "code": "",
					"cause": map[string]any{"name": "syscall.Errno", "message": "connection refused"}},
			}}
			failed = l.ExecutionID
		case 2:
			outcome = map[string]any{"status": "suspended"}
			suspended = l.ExecutionID
			call(t, base, "POST", "/v1/leases/steps", map[string]any{"lease": l, "key": "reserve-stock", "value": json.RawMessage(`{"reserved":true}`)}, nil)
		case 4:
			continue // still running under its lease
		}
		call(t, base, "POST", "/v1/leases/acknowledge", map[string]any{"lease": l, "outcome": outcome}, nil)
	}
	// A per-customer key limit on the queue, which pausing and resuming it
	// from the web view must keep.
	call(t, base, "PUT", "/v1/queues/charge-order", map[string]any{"concurrency": 8, "keyLimit": 1, "keyMode": "live"}, nil)
	call(t, base, "PUT", "/v1/schedules/nightly-settlement", map[string]any{
		"workflowId": "settle-payments", "cron": "0 2 * * *", "start": time.Now().UTC().Format(time.RFC3339), "catchUp": "latest",
	}, nil)
	if failed == "" || suspended == "" {
		t.Fatalf("seeding made no failed (%q) or suspended (%q) execution", failed, suspended)
	}
	return failed, suspended
}
