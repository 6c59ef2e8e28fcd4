package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Query parameters are read strictly: a parameter the route does not know,
// one given twice, or a value that does not parse answers 400
// INVALID_ARGUMENT. An empty value is the same as leaving the parameter out.

// queryParams checks a request's query against the parameters a route
// takes, and returns each one's value ("" when left out).
func queryParams(r *http.Request, known ...string) (map[string]string, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("query: %v", err)
	}
	out := make(map[string]string, len(known))
	for name, vals := range q {
		ok := false
		for _, k := range known {
			ok = ok || k == name
		}
		switch {
		case !ok:
			return nil, fmt.Errorf("unknown query parameter %q", name)
		case len(vals) > 1:
			return nil, fmt.Errorf("query parameter %q given %d times", name, len(vals))
		}
		out[name] = vals[0]
	}
	return out, nil
}

func parseTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: not an RFC 3339 time: %q", name, v)
	}
	return t, nil
}

// parseLimit reads a page's ?limit=, by the one rule every route keeps: left
// out or empty, the route's default (0 here); otherwise a whole number from
// 1, which the store bounds from above (over its bound: 422). Zero is not a
// way to ask for the default: it is refused, as any number under 1 is.
func parseLimit(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("limit: want a whole number from 1 (or none, for the default), got %q", v)
	}
	return n, nil
}
