package sim

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/execstore/execstore"
)

// The workload draws every value from small catalogs whose entries say
// whether API.md accepts them, so the model never needs a JSON parser of its
// own: what is valid is written down next to the bytes.

func utf8Valid(s string) bool { return utf8.ValidString(s) }
func isControl(r rune) bool   { return unicode.IsControl(r) }

// params is an admission's or child start's params.
type params struct {
	name  string // for the trace
	data  []byte // nil: no params
	valid bool
	class string // equal for the same object written differently; "" for none
}

func (p params) bytes() []byte {
	if p.data == nil {
		return nil
	}
	return slices.Clone(p.data)
}

var paramsCatalog = []params{
	{name: "none", valid: true},
	{name: "empty", data: []byte(`{}`), valid: true, class: "{}"},
	{name: "a1", data: []byte(`{"a":1}`), valid: true, class: "a1"},
	{name: "a1-spaced", data: []byte(`{ "a" : 1 }`), valid: true, class: "a1"},
	{name: "ab", data: []byte(`{"a":1,"b":[1,2,{"c":null}]}`), valid: true, class: "ab"},
	{name: "ba", data: []byte("{\"b\":[1, 2, {\"c\" : null}],\n\"a\":1}"), valid: true, class: "ab"},
	{name: "nested", data: []byte(`{"n":{"x":"y","z":[true,false]},"s":"\u00e9t\u00e9"}`), valid: true, class: "nested"},
	{name: "unicode", data: []byte(`{"k":"été ☃"}`), valid: true, class: "unicode"},
	{name: "array", data: []byte(`[1,2]`)},
	{name: "string", data: []byte(`"s"`)},
	{name: "null", data: []byte(`null`)},
	{name: "number", data: []byte(`12`)},
	{name: "dup-key", data: []byte(`{"a":1,"a":2}`)},
	{name: "deep-dup-key", data: []byte(`{"x":{"a":1,"b":{"c":1,"c":1}}}`)},
	{name: "lone-surrogate", data: []byte(`{"a":"\ud800"}`)},
	{name: "truncated", data: []byte(`{"a":`)},
	{name: "bad-utf8", data: []byte("{\"a\":\"\xff\"}")},
	{name: "empty-bytes", data: []byte{}},
	{name: "too-big", data: []byte(`{"big":"` + strings.Repeat("x", simEventBytes) + `"}`)},
}

// boundaryParams are params exactly at the event size limit and one byte
// past it (valid JSON both: the size alone decides).
var boundaryParams = []params{
	{name: "at-limit", data: []byte(`{"big":"` + strings.Repeat("x", simEventBytes-10) + `"}`), valid: true, class: "at-limit"},
	{name: "one-past", data: []byte(`{"big":"` + strings.Repeat("x", simEventBytes-9) + `"}`), valid: true, class: "one-past"},
}

// ctxArg is an admission's context.
type ctxArg struct {
	name  string
	m     map[string]string
	valid bool
}

func (c ctxArg) copy() map[string]string { return maps.Clone(c.m) }

func (c ctxArg) size() int {
	n := 0
	for k, v := range c.m {
		n += len(k) + len(v)
	}
	return n
}

var contextCatalog = []ctxArg{
	{name: "none", valid: true},
	{name: "empty", m: map[string]string{}, valid: true},
	{name: "tenant", m: map[string]string{"tenant": "t1"}, valid: true},
	{name: "tenant-region", m: map[string]string{"tenant": "t2", "region": "eu-west"}, valid: true},
	{name: "empty-value", m: map[string]string{"k": ""}, valid: true},
	{name: "empty-key", m: map[string]string{"": "v"}},
	{name: "bad-utf8-value", m: map[string]string{"k": "\xff"}},
	{name: "bad-utf8-key", m: map[string]string{"\xfe": "v"}},
	{name: "too-big", m: map[string]string{"big": strings.Repeat("y", simEventBytes)}, valid: true},
}

// value is a step value, a store value or a completed result.
type value struct {
	name string
	data []byte
	json bool // valid JSON (its size is checked against the limit separately)
}

var valueCatalog = []value{
	{name: "one", data: []byte(`1`), json: true},
	{name: "str", data: []byte(`"v"`), json: true},
	{name: "obj", data: []byte(`{"k":[2,3]}`), json: true},
	{name: "null", data: []byte(`null`), json: true},
	{name: "spaced", data: []byte(` [ 1 , {"a" : "b"} ] `), json: true},
	{name: "bad", data: []byte(`{`)},
	{name: "bad-word", data: []byte(`nul`)},
	{name: "dup-key", data: []byte(`{"a":1,"a":1}`)},
	{name: "big", data: []byte(`"` + strings.Repeat("z", simValueBytes) + `"`), json: true},
}

// boundaryValues are values exactly at the value size limit and one byte past
// it.
var boundaryValues = []value{
	{name: "at-limit", data: []byte(`"` + strings.Repeat("z", simValueBytes-2) + `"`), json: true},
	{name: "one-past", data: []byte(`"` + strings.Repeat("z", simValueBytes-1) + `"`), json: true},
}

// outcome is how the workload ends a delivery.
type outcome struct {
	name   string
	status execstore.Status
	result *value          // completed; nil: no result
	err    *workflowFailed // failed; nil: Failed(nil), which is refused
}

func (o outcome) valid() bool {
	switch o.status {
	case execstore.StatusSuspended, execstore.StatusCompleted:
		return true
	case execstore.StatusFailed:
		return o.err != nil
	}
	return false
}

func (o outcome) run() execstore.RunOutcome {
	switch o.status {
	case execstore.StatusCompleted:
		if o.result == nil {
			return execstore.Completed(nil)
		}
		return execstore.Completed(slices.Clone(o.result.data))
	case execstore.StatusFailed:
		if o.err == nil {
			return execstore.Failed(nil)
		}
		return execstore.Failed(o.err)
	}
	return execstore.RunOutcome{Status: o.status}
}

// recorded is the outcome a record keeps, per API.md: a completed result
// that cannot be stored is recorded as failed with code INVALID_STEP_VALUE.
func (o outcome) recorded(lim execstore.Limits) *execstore.Outcome {
	if o.status == execstore.StatusCompleted {
		if o.result == nil {
			return &execstore.Outcome{Status: execstore.StatusCompleted}
		}
		if o.result.json && len(o.result.data) <= lim.ValueBytes {
			return &execstore.Outcome{Status: execstore.StatusCompleted, Result: slices.Clone(o.result.data)}
		}
		return &execstore.Outcome{Status: execstore.StatusFailed, Error: &execstore.WorkflowError{Code: execstore.CodeInvalidStepValue}}
	}
	return &execstore.Outcome{Status: execstore.StatusFailed, Error: o.err.recorded()}
}

// workflowFailed is the error a failed outcome reports: it has a declared
// name and a code, and may wrap a cause.
type workflowFailed struct {
	msg, code string
	cause     error
}

func (e *workflowFailed) Error() string     { return e.msg }
func (e *workflowFailed) Code() string      { return e.code }
func (e *workflowFailed) ErrorName() string { return "SimWorkflowFailed" }
func (e *workflowFailed) Unwrap() error     { return e.cause }

// recorded is how API.md says the store records the error: name, message,
// code, and the cause the same way.
func (e *workflowFailed) recorded() *execstore.WorkflowError {
	w := &execstore.WorkflowError{Name: "SimWorkflowFailed", Message: e.msg, Code: e.code}
	switch c := e.cause.(type) {
	case nil:
	case *workflowFailed:
		w.Cause = c.recorded()
	default:
		w.Cause = &execstore.WorkflowError{Name: "*errors.errorString", Message: c.Error()}
	}
	return w
}

var outcomeCatalog = []outcome{
	{name: "suspended", status: execstore.StatusSuspended},
	{name: "completed", status: execstore.StatusCompleted},
	{name: "completed-one", status: execstore.StatusCompleted, result: &valueCatalog[0]},
	{name: "completed-obj", status: execstore.StatusCompleted, result: &valueCatalog[2]},
	{name: "completed-bad", status: execstore.StatusCompleted, result: &valueCatalog[5]},
	{name: "completed-big", status: execstore.StatusCompleted, result: &valueCatalog[8]},
	{name: "failed", status: execstore.StatusFailed, err: &workflowFailed{msg: "card declined", code: "DECLINED"}},
	{name: "failed-chain", status: execstore.StatusFailed, err: &workflowFailed{msg: "charge failed: timeout", code: "CHARGE",
		cause: &workflowFailed{msg: "timeout", code: "", cause: errors.New("i/o timeout")}}},
	{name: "failed-nil", status: execstore.StatusFailed},
	{name: "bogus-status", status: execstore.Status("running")},
}

// write is one Commit write.
type write struct {
	key   string
	value value
	del   bool
}

func (w write) api() execstore.Write {
	if w.del {
		return execstore.Write{Key: w.key}
	}
	return execstore.Write{Key: w.key, Value: json.RawMessage(slices.Clone(w.value.data))}
}

// admitArgs is one Admit.
type admitArgs struct {
	id, workflow string
	params       params
	context      ctxArg
	maxAttempts  int
	queue        string // "": the workflow's own
	priority     int    // 0: the default
	deadline     int64  // 0: none
	ckey         string // the concurrency key; "": none
}

func (a admitArgs) api() execstore.AdmitRequest {
	return execstore.AdmitRequest{ExecutionID: a.id, WorkflowID: a.workflow, Params: a.params.bytes(), Context: a.context.copy(),
		MaxAttempts: a.maxAttempts, Queue: a.queue, Priority: a.priority, Deadline: timeOf(a.deadline),
		ConcurrencyKey: a.ckey}
}

// cancelReasons are the reasons the workload cancels with: valid ones, one
// over the limit and one that is not UTF-8.
var cancelReasons = []string{"", "customer cancelled", "annulé ☃", strings.Repeat("r", simCancelReason+1), "bad\xffreason"}

// The limits the simulator configures: small, so that the workload can
// exceed each of them cheaply.
const (
	simEventBytes    = 512
	simValueBytes    = 256
	simKeyBytes      = 32
	simKeysPerWatch  = 4
	simWritesCommit  = 4
	simClaimLimit    = 64
	simLeaseDuration = 1 << 36 // about 69 seconds
	simRetryAfter    = 1 << 35 // about 34 seconds
	simCancelReason  = 24
)

func simLimits() execstore.Limits {
	return execstore.Limits{
		EventBytes:      simEventBytes,
		ValueBytes:      simValueBytes,
		KeyBytes:        simKeyBytes,
		KeysPerWatch:    simKeysPerWatch,
		WritesPerCommit: simWritesCommit,
		ClaimLimit:      simClaimLimit,
		LeaseDuration:   simLeaseDuration,
		RetryAfter:      simRetryAfter,

		CancelReasonBytes: simCancelReason,
		Schedules:         simSchedules,
		ScheduleCatchUp:   simScheduleCatchUp,
	}
}
