package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

// markup is what a hostile or careless client might put in an execution:
// every fragment must show it as text.
var ctx = context.Background()

const markup = `<script>alert(1)</script><img src=x onerror=alert(2)>"'&`

// markupFailure is an error whose every level carries markup.
type markupFailure struct{ cause error }

func (e markupFailure) Error() string { return "charge failed " + markup }
func (e markupFailure) Code() string  { return "CARD_" + markup }
func (e markupFailure) Unwrap() error { return e.cause }

// seedUI admits executions whose IDs, workflows, params, context, steps,
// watches and errors hold markup, fails one with a chain of causes,
// suspends another with a child, and puts a schedule with markup in its ID
// and workflow.
func seedUI(t *testing.T, store *execstore.Store) (failed, suspended string) {
	t.Helper()
	params := json.RawMessage(fmt.Sprintf(`{"note":%q,"nested":{"html":%q}}`, markup, markup))
	failed, suspended = "order-"+markup, "parent-"+markup
	for _, id := range []string{failed, suspended} {
		if _, err := store.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "wf-" + markup, Params: params,
			Context: map[string]string{"k-" + markup: "v-" + markup}}); err != nil {
			t.Fatal(err)
		}
	}
	leases, err := store.ClaimDue(ctx, 2, time.Minute)
	if err != nil || len(leases) != 2 {
		t.Fatalf("claim: %v %v", leases, err)
	}
	for _, l := range leases {
		if err := store.SaveStep(ctx, l, "step-"+markup, params); err != nil {
			t.Fatal(err)
		}
		if l.ExecutionID == failed {
			cause := markupFailure{cause: errors.New("gateway said " + markup)}
			if _, err := store.Acknowledge(ctx, l, execstore.Failed(fmt.Errorf("outer %s: %w", markup, cause))); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := store.Start(ctx, l, "child-"+markup, "wf-child", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Watch(ctx, l.ExecutionID, "key-"+markup); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Acknowledge(ctx, l, execstore.Suspended()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.PutSchedule(ctx, execstore.Schedule{ID: "nightly-" + markup, WorkflowID: "wf-" + markup,
		Cron: "0 2 * * *", Start: store.Now()}); err != nil {
		t.Fatal(err)
	}
	return failed, suspended
}

// Every fragment of the web view shows IDs, workflows, params, context,
// steps, watches and every level of an error chain as text: markup in them
// never reaches the page as markup.
func TestTheWebViewEscapesMarkupInEveryValue(t *testing.T) {
	base, store := newTokenServer(t, testToken)
	failed, suspended := seedUI(t, store)
	pages := map[string]int{
		"/ui/f/overview":   0,
		"/ui/f/executions": 4, // IDs, workflows, outcome message
		"/ui/f/executions?status=failed&workflow=" + url.QueryEscape("wf-"+markup): 1,
		"/ui/f/executions/" + url.PathEscape(failed):                               6,
		"/ui/f/executions/" + url.PathEscape(suspended):                            6,
		"/ui/f/schedules": 2, // its ID and workflow
		"/ui/f/queues":    2, // the workflows' own queues' names, in the cell and the button
	}
	for path, minEscaped := range pages {
		resp, body := send(t, "GET", base+path, "Bearer "+testToken, "")
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("%s: %d %s\n%s", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		page := string(body)
		for _, raw := range []string{"<script>", "<img", "onerror=alert(2)>"} {
			if strings.Contains(page, raw) {
				t.Errorf("%s: the page holds %q unescaped", path, raw)
			}
		}
		if n := strings.Count(page, "&lt;script&gt;alert(1)&lt;/script&gt;"); n < minEscaped {
			t.Errorf("%s: the markup appears escaped %d times, want at least %d:\n%s", path, n, minEscaped, page)
		}
	}
	_, body := send(t, "GET", base+"/ui/f/executions/"+url.PathEscape(failed), "Bearer "+testToken, "")
	for _, want := range []string{"outer ", "charge failed ", "gateway said ", "CARD_", "caused by"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the failed record's page lacks %q of its error chain", want)
		}
	}
}

// An archived execution's page says it was read from the archive.
func TestTheWebViewMarksAnArchivedRecord(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, err := execstore.Open(t.TempDir(), execstore.Options{NoSync: true, Retention: time.Hour, Archive: true,
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ts := httptest.NewServer(newAPI(store, slog.New(slog.DiscardHandler)))
	defer ts.Close()
	for _, id := range []string{"archived", "kept"} {
		if _, err := store.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"}); err != nil {
			t.Fatal(err)
		}
		leases, err := store.ClaimDue(ctx, 1, time.Minute)
		if err != nil || len(leases) != 1 {
			t.Fatalf("claim: %v %v", leases, err)
		}
		if _, err := store.Acknowledge(ctx, leases[0], execstore.Completed(nil)); err != nil {
			t.Fatal(err)
		}
		if id == "kept" {
			break
		}
		now = now.Add(2 * time.Hour)
		if err := store.Commit(ctx, execstore.Write{Key: "tick", Value: json.RawMessage(`1`)}); err != nil { // a write: "archived" retires first
			t.Fatal(err)
		}
	}
	for id, want := range map[string]bool{"archived": true, "kept": false} {
		resp, body := send(t, "GET", ts.URL+"/ui/f/executions/"+id, "", "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", id, resp.StatusCode, body)
		}
		if marked := strings.Contains(string(body), "read from the archive"); marked != want {
			t.Fatalf("%s's page marked archived: %v, want %v:\n%s", id, marked, want, body)
		}
	}
}

// The shell and its static files need no token and hold no data (the
// pages allow only the server's own script and stylesheet); every fragment
// needs the token.
func TestTheWebViewShellIsPublicAndItsDataNeedsTheToken(t *testing.T) {
	base, store := newTokenServer(t, testToken)
	seedUI(t, store)
	for _, path := range []string{"/ui/", "/ui/executions/x", "/ui/schedules", "/ui/static/app.js", "/ui/static/style.css"} {
		resp, body := send(t, "GET", base+path, "", "")
		if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "wf-") {
			t.Errorf("%s without a token: %d (data in it: %t)", path, resp.StatusCode, strings.Contains(string(body), "wf-"))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasSuffix(path, ".js") && !strings.HasSuffix(path, ".css") &&
			!strings.Contains(csp, "script-src 'self'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
	}
	for _, path := range []string{"/ui/f/overview", "/ui/f/executions", "/ui/f/executions/x", "/ui/f/schedules"} {
		if resp, _ := send(t, "GET", base+path, "", ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", path, resp.StatusCode)
		}
	}
	if resp, _ := send(t, "GET", base+"/ui/f/executions/missing", "Bearer "+testToken, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a missing record's fragment: %d, want 404", resp.StatusCode)
	}
	if resp, _ := send(t, "POST", base+"/ui/", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /ui/ without a token: %d, want 401", resp.StatusCode)
	}
}

// The queues page lists each queue with its counts and limits, and a pause
// or resume button for it (the confirmation reads the queue's settings
// again and puts them back with the pause changed).
func TestTheWebViewListsQueuesWithTheirLimits(t *testing.T) {
	base, store := newTokenServer(t, testToken)
	for i := range 3 {
		if _, err := store.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprintf("c-%d", i), WorkflowID: "charge"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.PutQueue(ctx, execstore.QueueSettings{Name: "charge", Concurrency: 2, Rate: 5, RatePeriod: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.PutQueue(ctx, execstore.QueueSettings{Name: "mail", Paused: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, execstore.ClaimRequest{Limit: 10, LeaseDuration: time.Minute, Queues: []string{"charge"}}); err != nil {
		t.Fatal(err)
	}
	// A key limit: the page shows each queue's keys with the most waiting.
	if _, err := store.PutQueue(ctx, execstore.QueueSettings{Name: "ship", KeyLimit: 1, KeyMode: execstore.KeyLive}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := store.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprintf("s-%d", i), WorkflowID: "ship", ConcurrencyKey: "customer-7"}); err != nil {
			t.Fatal(err)
		}
	}
	resp, body := send(t, "GET", base+"/ui/f/queues", "Bearer "+testToken, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d\n%s", resp.StatusCode, body)
	}
	page := string(body)
	for _, want := range []string{
		`<tr data-queue="charge">`, "2 of 2", "2 of 5 per 1 s", `data-queue-pause="true" data-name="charge"`,
		">Pause…<",
		`<tr data-queue="mail">`, `badge s-paused`, `data-queue-pause="false" data-name="mail"`, ">Resume…<",
		"1 per key (live), 2 parked", `data-key="customer-7">customer-7</span>: 0 holding, 1 ready, 2 parked`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the queues page lacks %q:\n%s", want, page)
		}
	}
	if resp, _ := send(t, "GET", base+"/ui/f/queues", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the queues fragment without the token answered %d", resp.StatusCode)
	}
}

// A record's page shows its queue, priority and deadline when it has them.
func TestTheWebViewShowsARecordsQueuePriorityAndDeadline(t *testing.T) {
	base, store := newTokenServer(t, testToken)
	deadline := store.Now().Add(time.Hour)
	if _, err := store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-1", WorkflowID: "charge", Queue: "payments",
		Priority: execstore.PriorityFirst, Deadline: deadline}); err != nil {
		t.Fatal(err)
	}
	_, body := send(t, "GET", base+"/ui/f/executions/order-1", "Bearer "+testToken, "")
	for _, want := range []string{"<th>Queue</th><td>payments</td>", "<th>Priority</th><td>1 ", `<th>Deadline</th><td><time datetime="` + deadline.UTC().Format(time.RFC3339Nano)} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the record's page lacks %q:\n%s", want, body)
		}
	}
}
