package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
)

// tokenEnv names the environment variable that may hold serve's token
// instead of --token-file.
const tokenEnv = "EXECSTORE_TOKEN"

// tokenBytesMin is the shortest token serve accepts: a short token can be
// guessed over the network.
const tokenBytesMin = 16

// loadToken returns the token serve requires: the first line of file when it
// is given, else the value of EXECSTORE_TOKEN, else "" (no token). A token
// shorter than tokenBytesMin bytes or with inner spaces or control
// characters is refused.
func loadToken(file string) (string, error) {
	var token, from string
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		token, _, _ = strings.Cut(string(b), "\n")
		token, from = strings.TrimSpace(token), "token file "+file
	case os.Getenv(tokenEnv) != "":
		token, from = strings.TrimSpace(os.Getenv(tokenEnv)), tokenEnv
	default:
		return "", nil
	}
	if len(token) < tokenBytesMin {
		return "", fmt.Errorf("the token in %s has %d bytes; at least %d are required", from, len(token), tokenBytesMin)
	}
	for _, r := range token {
		if r <= ' ' || r == 0x7f {
			return "", fmt.Errorf("the token in %s holds a space or a control character", from)
		}
	}
	return token, nil
}

// requireToken answers 401 to every request without "Authorization: Bearer
// <token>", except those public says need none (/healthz and the web view's
// static shell, which hold no data). The comparison takes the same time
// whatever the token given: both sides are hashed first, so neither their
// bytes nor their lengths leak through timing.
func requireToken(token string, public func(*http.Request) bool, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if public(r) {
			next.ServeHTTP(w, r)
			return
		}
		given, ok := bearer(r.Header.Get("Authorization"))
		got := sha256.Sum256([]byte(given))
		if !ok || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="execstore"`)
			msg := "this server requires a token: send the header \"Authorization: Bearer <token>\""
			if ok {
				msg = "the bearer token is not this server's"
			}
			writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearer returns the token of an "Authorization: Bearer <token>" header
// value; the scheme is case-insensitive, as RFC 7235 says.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// errNotLoopback refuses to serve an address others can reach without a
// token.
var errNotLoopback = errors.New("refusing to serve without a token on an address other machines can reach; " +
	"give --token-file (or " + tokenEnv + "), listen on a loopback address, or pass --insecure")

// checkListenAddr refuses a listener that is not on a loopback address
// unless a token protects it or insecure is set. It judges the address the
// listener got, so a name that resolves to a public address is caught too.
func checkListenAddr(addr net.Addr, token string, insecure bool) error {
	if token != "" || insecure {
		return nil
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsLoopback() {
		return fmt.Errorf("%s: %w", addr, errNotLoopback)
	}
	return nil
}

// isPublic says which requests need no token: the health check, which a
// load balancer asks without credentials and which tells nothing about the
// executions, and the web view's shell and static files, which hold no data
// (a browser cannot send a token with a page load; the shell's script sends
// it with every request for data).
func isPublic(r *http.Request) bool {
	return r.URL.Path == "/healthz" || isUIShell(r)
}
