package main

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/execstore/execstore"
)

// The web view at /ui/: a static shell (ui/templates/shell.html, with
// ui/static/app.js and style.css) that holds no data and is served without
// a token, and HTML fragments under /ui/f/ that the shell fetches with the
// token and shows. Every fragment is rendered on the server by html/template,
// which escapes every value for the context it lands in; the script only
// moves fragments into the page, asks for the token, turns times into
// relative ones and sends a cancellation, or a queue's pause or resume,
// through the API. Nothing is fetched
// from anywhere else.

//go:embed ui
var uiFiles embed.FS

var uiTemplates = template.Must(template.New("ui").Funcs(template.FuncMap{
	"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"clock":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"execURL": func(id string) string { return "/ui/executions/" + url.PathEscape(id) },
	"workflowURL": func(w string) string {
		return "/ui/?" + url.Values{"workflow": {w}}.Encode()
	},
	"offset": func(d time.Duration) string {
		sign := "+"
		if d < 0 {
			sign, d = "-", -d
		}
		return fmt.Sprintf("%s%02d:%02d", sign, int(d.Hours()), int(d.Minutes())%60)
	},
	"sub": func(a, b int) int { return a - b },
}).ParseFS(uiFiles, "ui/templates/*.html"))

// uiTimeout bounds the work of one fragment, as the API bounds a wait.
const uiTimeout = 10 * time.Second

// uiStepsMax and uiChildrenMax bound what a record's page lists.
const (
	uiStepsMax    = 200
	uiChildrenMax = 100
)

type webUI struct {
	store  *execstore.Store
	logger *slog.Logger
}

// uiStatic serves the shell's script and style sheet.
func uiStatic() http.Handler {
	static, _ := fs.Sub(uiFiles, "ui/static")
	return http.StripPrefix("/ui/static/", http.FileServerFS(static))
}

// toShell sends /ui to the shell at /ui/.
func (u *webUI) toShell(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/ui/", http.StatusFound)
}

// isUIShell says whether a request is for the web view's shell or its
// static files, which hold no data and need no token (a browser cannot send
// one with a page load; the shell's script sends it with every fragment).
func isUIShell(r *http.Request) bool {
	p := r.URL.Path
	return r.Method == http.MethodGet && (p == "/ui" || strings.HasPrefix(p, "/ui/")) && !strings.HasPrefix(p, "/ui/f/")
}

func (u *webUI) shell(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/ui/f/") {
		http.NotFound(w, r)
		return
	}
	u.render(w, "shell.html", nil)
}

// fragment runs a fragment's handler under the UI's time limit. A handler
// returns the template and its data, or an error for the whole fragment.
func (u *webUI) fragment(fn func(ctx context.Context, r *http.Request) (string, any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), uiTimeout)
		defer cancel()
		name, data, err := fn(ctx, r)
		if err != nil {
			status := http.StatusInternalServerError
			switch {
			case errors.Is(err, execstore.ErrExecutionNotFound):
				status = http.StatusNotFound
			case errors.Is(err, execstore.ErrClosed), errors.Is(err, context.DeadlineExceeded):
				status = http.StatusServiceUnavailable
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(status)
			template.Must(template.New("e").Parse(`<div class="page"><div class="alert">{{.}}</div></div>`)).Execute(w, err.Error())
			return
		}
		u.render(w, name, data)
	}
}

// render executes a template into a buffer first, so that a failure is a
// clean 500 rather than half a page.
func (u *webUI) render(w http.ResponseWriter, name string, data any) {
	var buf bytes.Buffer
	if err := uiTemplates.ExecuteTemplate(&buf, name, data); err != nil {
		u.logger.Error("execstore: rendering the web view", "template", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(buf.Bytes())
}

// ---- overview ------------------------------------------------------------------

type statusCount struct {
	Status execstore.Status
	Count  int
	URL    string
}

type overviewData struct {
	Now                   time.Time
	ByStatus              []statusCount
	Waiting               int
	DueNow                int
	OldestDue             string
	Backlogged            bool
	Leases, LeasesExpired int
	Schedules             int
	WAL                   string
	WALSegments           int
	SnapshotAt            time.Time
	SnapshotBytes         string
	Failed, Fallback      string
}

var uiStatuses = []execstore.Status{execstore.StatusAdmitted, execstore.StatusSuspended,
	execstore.StatusCompleted, execstore.StatusFailed, execstore.StatusCancelled}

// backloggedAfter is the oldest due age the overview shows as hot.
const backloggedAfter = time.Minute

func (u *webUI) overview(ctx context.Context, _ *http.Request) (string, any, error) {
	g, err := u.store.Gauges(ctx)
	if err != nil {
		return "", nil, err
	}
	d := overviewData{
		Now: g.Now, Waiting: g.Waiting, DueNow: g.DueNow, Leases: g.Leases, LeasesExpired: g.LeasesExpired,
		Schedules: g.Schedules, WAL: bytesText(g.WALBytes), WALSegments: g.WALSegments, SnapshotAt: g.SnapshotAt,
		OldestDue: "none", Backlogged: g.OldestDueAge > backloggedAfter,
	}
	if g.OldestDueAge > 0 {
		d.OldestDue = durationText(g.OldestDueAge)
	}
	if g.SnapshotBytes > 0 {
		d.SnapshotBytes = bytesText(g.SnapshotBytes)
	}
	for _, st := range uiStatuses {
		d.ByStatus = append(d.ByStatus, statusCount{Status: st, Count: g.ByStatus[st], URL: "/ui/?status=" + string(st)})
	}
	if g.Failed != nil {
		d.Failed = g.Failed.Error()
	}
	if g.FallbackErr != nil {
		d.Fallback = g.FallbackErr.Error()
	}
	return "overview", d, nil
}

// ---- the list --------------------------------------------------------------------

type listData struct {
	Now              time.Time
	Records          []execstore.Record
	Status, Workflow string
	Parent           string
	Order            string
	Statuses         []execstore.Status
	Workflows        []string
	Next, First      string
	Error            string
}

func (u *webUI) list(ctx context.Context, r *http.Request) (string, any, error) {
	q := r.URL.Query()
	d := listData{
		Now: u.store.Now(), Status: q.Get("status"), Workflow: q.Get("workflow"), Parent: q.Get("parent"),
		Order: q.Get("order"), Statuses: uiStatuses,
	}
	if d.Order != string(execstore.OldestFirst) {
		d.Order = string(execstore.NewestFirst) // what an operator looks for first
	}
	page, err := u.store.List(ctx, execstore.ListQuery{
		Status: execstore.Status(d.Status), WorkflowID: d.Workflow, ParentID: d.Parent, Order: execstore.Order(d.Order),
		Limit: 50, Cursor: q.Get("cursor"),
	})
	switch {
	case errors.Is(err, execstore.ErrInvalidArgument):
		d.Error = err.Error() // a bad filter or cursor: say so on the page
	case err != nil:
		return "", nil, err
	}
	d.Records = page.Records
	base := url.Values{}
	for k, v := range map[string]string{"status": d.Status, "workflow": d.Workflow, "parent": d.Parent, "order": d.Order} {
		if v != "" {
			base.Set(k, v)
		}
	}
	if page.Cursor != "" {
		next := url.Values{"cursor": {page.Cursor}}
		for k, v := range base {
			next[k] = v
		}
		d.Next = "/ui/?" + next.Encode()
	}
	if q.Get("cursor") != "" {
		d.First = "/ui/?" + base.Encode()
	}
	st, err := u.store.Stats(ctx)
	if err != nil {
		return "", nil, err
	}
	for w := range st.ByWorkflow {
		d.Workflows = append(d.Workflows, w)
	}
	sort.Strings(d.Workflows)
	return "list", d, nil
}

// ---- a record --------------------------------------------------------------------

type recordData struct {
	Now          time.Time
	Record       execstore.Record
	Params       string
	Result       string
	ErrorChain   []*execstore.WorkflowError
	Context      []kv
	Steps        []stepView
	StepCount    int
	Watches      [][]string
	Children     []execstore.Record
	ChildrenMore bool
	ChildrenURL  string
	LeaseExpired bool
	Retired      bool
}

type kv struct{ Key, Value string }

type stepView struct{ Key, Value string }

func (u *webUI) record(ctx context.Context, r *http.Request) (string, any, error) {
	id := r.PathValue("id")
	rec, err := u.store.Get(ctx, id)
	if err != nil {
		return "", nil, err
	}
	det, err := u.store.Detail(ctx, id, uiStepsMax)
	if err != nil {
		return "", nil, err
	}
	children, err := u.store.List(ctx, execstore.ListQuery{ParentID: id, Limit: uiChildrenMax})
	if err != nil {
		return "", nil, err
	}
	d := recordData{
		Now: u.store.Now(), Record: rec, Params: prettyJSON(rec.Params), StepCount: det.StepCount,
		Watches: det.Watches, Children: children.Records, ChildrenMore: children.Cursor != "",
		Retired: rec.Archived || (rec.Status.Terminal() && rec.Params == nil && rec.Context == nil),
	}
	d.LeaseExpired = rec.Lease != nil && !rec.Lease.ExpiresAt.After(d.Now)
	if o := rec.Outcome; o != nil {
		d.Result = prettyJSON(o.Result)
		for e := o.Error; e != nil; e = e.Cause {
			d.ErrorChain = append(d.ErrorChain, e)
		}
	}
	for k, v := range rec.Context {
		d.Context = append(d.Context, kv{k, v})
	}
	slices.SortFunc(d.Context, func(a, b kv) int { return strings.Compare(a.Key, b.Key) })
	for _, s := range det.Steps {
		d.Steps = append(d.Steps, stepView{Key: s.Key, Value: prettyJSON(s.Value)})
	}
	if d.ChildrenMore {
		d.ChildrenURL = "/ui/?" + url.Values{"parent": {id}}.Encode()
	}
	return "record", d, nil
}

// ---- schedules ----------------------------------------------------------------

type schedulesData struct {
	Now       time.Time
	Schedules []execstore.Schedule
}

func (u *webUI) schedules(ctx context.Context, _ *http.Request) (string, any, error) {
	scs, err := u.store.ListSchedules(ctx)
	if err != nil {
		return "", nil, err
	}
	return "schedules", schedulesData{Now: u.store.Now(), Schedules: scs}, nil
}

// ---- queues ----------------------------------------------------------------------

type queuesData struct {
	Now    time.Time
	Queues []queueView
	More   bool   // a first page of execstore.ListQueuesMax; Next continues it
	Next   string // the page after this one
}

type queueView struct {
	execstore.QueueInfo
	Period string              // the rate's period as a person says it
	Keys   []execstore.KeyInfo // with a key limit: the keys with the most waiting
}

// queuePageKeys is how many keys the queues page shows of each queue with a
// key limit: those with the most executions waiting.
const queuePageKeys = 5

// queues lists the queues with settings or live executions, a page of
// ListQueuesMax from ?after=, each with its counts, limits and a pause or
// resume button behind a confirmation.
func (u *webUI) queues(ctx context.Context, r *http.Request) (string, any, error) {
	after := r.URL.Query().Get("after")
	list, err := u.store.ListQueues(ctx, after)
	if err != nil {
		return "", nil, err
	}
	d := queuesData{Now: u.store.Now()}
	for _, q := range list {
		v := queueView{QueueInfo: q}
		if q.Rate > 0 {
			v.Period = durationText(q.RatePeriod)
		}
		if q.KeyLimit > 0 {
			if v.Keys, err = u.store.QueueKeys(ctx, q.Name, queuePageKeys); err != nil {
				return "", nil, err
			}
		}
		d.Queues = append(d.Queues, v)
	}
	if len(list) == execstore.ListQueuesMax {
		d.More, d.Next = true, "/ui/queues?"+url.Values{"after": {list[len(list)-1].Name}}.Encode()
	}
	return "queues", d, nil
}

// ---- formatting ------------------------------------------------------------------

// prettyJSON indents a JSON value for reading; anything else is shown as
// it is. "" for none.
func prettyJSON(v json.RawMessage) string {
	if v == nil {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, v, "", "  "); err != nil {
		return string(v)
	}
	return buf.String()
}

func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// durationText is a duration as a person says it: "42 s", "3 min", "5 h".
func durationText(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}
