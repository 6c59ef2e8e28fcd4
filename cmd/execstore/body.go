package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Request bodies are read in three passes. jsonv checks that the body is one
// JSON object that decoders read back without loss (no duplicate keys, valid
// UTF-8, bounded depth). decodeBody then walks the body alongside the Go
// type it is for, before encoding/json fills that type in, because
// encoding/json is lenient where the README promises strictness:
//
//   - it matches object keys to fields without regard to case, so
//     {"workflowId":"a","WorkflowID":"b"} passes the duplicate-key check and
//     one of the two values is silently dropped;
//   - it cannot tell a missing field from one sent as its zero value, so a
//     store write without "value" would read as a delete;
//   - it takes null for a field of any type and leaves the field alone;
//   - its errors name Go types ("cannot unmarshal string into Go struct field
//     .lease of type main.leaseJSON").
//
// Only a body the walk accepts reaches encoding/json, which then has nothing
// left to fail on or to guess. The rules, for every field at every depth:
//
//   - An object key is exactly the JSON name of a field of its object:
//     case-sensitive, and nothing else. A map's keys are free.
//   - A field is required unless its json tag says omitempty. The mark that
//     lets an answer leave a field out lets a request leave it out, and the
//     README's route table marks the same fields with "?".
//   - A value has the kind its field holds, in JSON terms: a string, an
//     integer within the field's range, an object, an array, an RFC 3339
//     time, a whole number of milliseconds that fits a time.Duration (millis).
//   - null is a value only where Go has a nil: a json.RawMessage, whose
//     meaning is the store's to judge (a null store value deletes), and a
//     pointer (an absent error or cause).
//
// An error names the field by its path in the body ("outcome.error.cause",
// "writes[1].value") and what it must be.

// millis is a body field that counts milliseconds of a time.Duration.
// decodeBody admits only 0 to maxMillis, so that the duration, which counts
// nanoseconds in an int64, neither overflows nor goes negative. A zero
// that the store refuses (a lease of no time) is the store's to refuse.
type millis int64

// maxMillis is the largest whole number of milliseconds a time.Duration
// holds: about 292 years.
const maxMillis = math.MaxInt64 / int64(time.Millisecond)

// duration converts a checked millis.
func (m millis) duration() time.Duration { return time.Duration(m) * time.Millisecond }

// bodyError is a request body that breaks a rule; its message is for the
// client.
type bodyError struct{ msg string }

func (e *bodyError) Error() string { return e.msg }

// decodeBody fills v, a pointer to a body struct, from b, which MUST have
// passed jsonv.ValidateObject. A body that breaks a rule is a *bodyError.
func decodeBody(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	w := walker{d: d}
	if err := w.value(reflect.TypeOf(v).Elem(), ""); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// walker reads a body token by token.
type walker struct{ d *json.Decoder }

var (
	rawType     = reflect.TypeFor[json.RawMessage]()
	timeType    = reflect.TypeFor[time.Time]()
	timePtrType = reflect.TypeFor[*time.Time]()
	millisType  = reflect.TypeFor[millis]()
)

// value checks the next value in the body against t; path names it.
func (w *walker) value(t reflect.Type, path string) error {
	if t == rawType {
		var skip json.RawMessage
		return w.d.Decode(&skip)
	}
	if t == timeType || t == timePtrType {
		return w.time(t, path)
	}
	tok, err := w.d.Token()
	if err != nil {
		return err
	}
	if t.Kind() == reflect.Pointer {
		if tok == nil {
			return nil
		}
		t = t.Elem()
	}
	n, isNumber := tok.(json.Number)
	ok := false
	switch k := t.Kind(); {
	case t == millisType:
		ms, err := strconv.ParseInt(string(n), 10, 64)
		ok = isNumber && err == nil && ms >= 0 && ms <= maxMillis
	case k == reflect.Struct && tok == json.Delim('{'):
		return w.object(t, path)
	case k == reflect.Map && tok == json.Delim('{'):
		return w.mapEntries(t, path)
	case k == reflect.Slice && tok == json.Delim('['):
		return w.elements(t, path)
	case k == reflect.Struct, k == reflect.Map, k == reflect.Slice:
		// not the container the field holds
	case k == reflect.String:
		_, ok = tok.(string)
	case k == reflect.Bool:
		_, ok = tok.(bool)
	case k >= reflect.Int && k <= reflect.Int64:
		_, err := strconv.ParseInt(string(n), 10, t.Bits())
		ok = isNumber && err == nil
	case k >= reflect.Uint && k <= reflect.Uint64:
		_, err := strconv.ParseUint(string(n), 10, t.Bits())
		ok = isNumber && err == nil
	default:
		panic("decodeBody: no rule for a body field of kind " + k.String())
	}
	if !ok {
		return wrongKind(path, t)
	}
	return nil
}

func wrongKind(path string, t reflect.Type) error {
	return &bodyError{fmt.Sprintf("%q must be %s", path, kindOf(t))}
}

// time checks a time the way encoding/json will read it: time.Time's
// UnmarshalJSON, which parses the string's bytes without unescaping them.
func (w *walker) time(t reflect.Type, path string) error {
	var raw json.RawMessage
	if err := w.d.Decode(&raw); err != nil {
		return err
	}
	if string(raw) == "null" {
		if t == timePtrType {
			return nil
		}
	} else if new(time.Time).UnmarshalJSON(raw) == nil {
		return nil
	}
	return wrongKind(path, timeType)
}

// object checks an object's members against struct t; its '{' is read.
func (w *walker) object(t reflect.Type, path string) error {
	fields := bodyFieldsOf(t)
	var seen uint64 // bit i: fields[i] is present; jsonv refused repeats
	for w.d.More() {
		tok, err := w.d.Token()
		if err != nil {
			return err
		}
		key := tok.(string)
		i := fields.index(key)
		if i < 0 {
			return unknownField(path, key, fields)
		}
		seen |= 1 << i
		if err := w.value(fields[i].typ, member(path, key)); err != nil {
			return err
		}
	}
	if _, err := w.d.Token(); err != nil { // '}'
		return err
	}
	for i, f := range fields {
		if seen&(1<<i) == 0 && !f.optional {
			if path == "" {
				return &bodyError{fmt.Sprintf("missing required field %q", f.name)}
			}
			return &bodyError{fmt.Sprintf("missing required field %q in %q", f.name, path)}
		}
	}
	return nil
}

// mapEntries checks an object read into map t; its '{' is read.
func (w *walker) mapEntries(t reflect.Type, path string) error {
	for w.d.More() {
		tok, err := w.d.Token()
		if err != nil {
			return err
		}
		if err := w.value(t.Elem(), member(path, tok.(string))); err != nil {
			return err
		}
	}
	_, err := w.d.Token() // '}'
	return err
}

// elements checks an array read into slice t; its '[' is read.
func (w *walker) elements(t reflect.Type, path string) error {
	for i := 0; w.d.More(); i++ {
		if err := w.value(t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
			return err
		}
	}
	_, err := w.d.Token() // ']'
	return err
}

// member is the path of key inside the value at path.
func member(path, key string) string {
	key = shorten(key)
	if path == "" {
		return key
	}
	return path + "." + key
}

// keyShownMax bounds how much of a client's key a message repeats.
const keyShownMax = 64

func shorten(key string) string {
	if len(key) <= keyShownMax {
		return key
	}
	n := keyShownMax
	for n > 0 && !utf8.RuneStart(key[n]) {
		n--
	}
	return key[:n] + "..."
}

func unknownField(path, key string, fields bodyFields) error {
	msg := fmt.Sprintf("unknown field %q", shorten(key))
	if path != "" {
		msg += fmt.Sprintf(" in %q", path)
	}
	for _, f := range fields {
		if strings.EqualFold(f.name, key) {
			msg += fmt.Sprintf(" (field names are case-sensitive: did you mean %q?)", f.name)
			break
		}
	}
	return &bodyError{msg}
}

// kindOf says, in JSON terms, what a value for a field of type t must be.
func kindOf(t reflect.Type) string {
	switch t {
	case millisType:
		return fmt.Sprintf("a whole number of milliseconds from 0 to %d", maxMillis)
	case timeType:
		return "an RFC 3339 time"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		lowest := int64(-1) << (t.Bits() - 1)
		return fmt.Sprintf("an integer from %d to %d", lowest, -(lowest + 1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("an integer from 0 to %d", uint64(math.MaxUint64)>>(64-t.Bits()))
	case reflect.Bool:
		return "true or false"
	}
	return "something else"
}

// bodyField is one field of a body struct.
type bodyField struct {
	name     string // its JSON name, matched exactly
	optional bool   // its tag says omitempty
	typ      reflect.Type
}

type bodyFields []bodyField

func (fs bodyFields) index(name string) int {
	for i, f := range fs {
		if f.name == name {
			return i
		}
	}
	return -1
}

var bodyFieldCache sync.Map // reflect.Type → bodyFields

// bodyFieldsOf lists struct t's fields. Every exported field of a body
// struct MUST name its JSON key in a tag; a struct has at most 64 fields.
func bodyFieldsOf(t reflect.Type) bodyFields {
	if fs, ok := bodyFieldCache.Load(t); ok {
		return fs.(bodyFields)
	}
	var fs bodyFields
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" || f.Anonymous {
			panic("decodeBody: body field " + t.String() + "." + f.Name + " has no JSON name")
		}
		optional := false
		for o := range strings.SplitSeq(opts, ",") {
			optional = optional || o == "omitempty"
		}
		fs = append(fs, bodyField{name: name, optional: optional, typ: f.Type})
	}
	if len(fs) > 64 {
		panic("decodeBody: body struct " + t.String() + " has more than 64 fields")
	}
	bodyFieldCache.Store(t, fs)
	return fs
}
