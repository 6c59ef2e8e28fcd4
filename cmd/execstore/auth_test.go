package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

const testToken = "s3cret-token-0123456789"

// newTokenServer serves the whole handler (API, metrics, web view) behind
// the token.
func newTokenServer(t *testing.T, token string) (string, *execstore.Store) {
	t.Helper()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, err := execstore.Open(t.TempDir(), execstore.Options{NoSync: true, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(newHandler(store, slog.New(slog.DiscardHandler), serveConfig{token: token}))
	t.Cleanup(func() { ts.Close(); store.Close() })
	return ts.URL, store
}

func send(t *testing.T, method, url, auth, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, raw
}

// With a token, every route but /healthz answers 401 UNAUTHORIZED, in JSON
// and with a WWW-Authenticate challenge, to a request without the token or
// with another one, and is served with it.
func TestServeWithATokenRefusesEveryRouteButHealthzWithoutIt(t *testing.T) {
	url, _ := newTokenServer(t, testToken)
	routes := []struct{ method, path, body string }{
		{"POST", "/v1/executions", `{"executionId":"e","workflowId":"w"}`},
		{"GET", "/v1/executions", ""},
		{"GET", "/v1/executions/e", ""},
		{"POST", "/v1/executions/e/cancel", `{"reason":"r"}`},
		{"POST", "/v1/claims", `{"limit":1,"leaseDurationMs":1000}`},
		{"GET", "/v1/stats", ""},
		{"GET", "/v1/changes", ""},
		{"GET", "/v1/schedules", ""},
		{"GET", "/metrics", ""},
		{"GET", "/ui/f/executions", ""},
		{"GET", "/no/such/route", ""},
	}
	for _, auth := range []string{"", "Bearer wrong-token-0123456789", "Basic " + testToken, "Bearer", testToken} {
		for _, rt := range routes {
			resp, raw := send(t, rt.method, url+rt.path, auth, rt.body)
			var out map[string]string
			if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal(raw, &out) != nil || out["code"] != "UNAUTHORIZED" || out["message"] == "" {
				t.Errorf("%s %s with %q: %d %s, want 401 UNAUTHORIZED", rt.method, rt.path, auth, resp.StatusCode, raw)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != `Bearer realm="execstore"` {
				t.Errorf("%s %s: WWW-Authenticate %q", rt.method, rt.path, got)
			}
		}
	}
	for _, auth := range []string{"Bearer " + testToken, "bearer " + testToken} {
		for _, rt := range routes {
			if resp, raw := send(t, rt.method, url+rt.path, auth, rt.body); resp.StatusCode == http.StatusUnauthorized {
				t.Errorf("%s %s with the token: 401 %s", rt.method, rt.path, raw)
			}
		}
	}
	if resp, raw := send(t, "GET", url+"/healthz", "", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz without a token: %d %s, want 200", resp.StatusCode, raw)
	}
}

// The token comes from the first line of --token-file, else from
// EXECSTORE_TOKEN; a short token, or one with spaces or control characters,
// is refused.
func TestServeReadsItsTokenFromAFileOrTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, file, env, want, err string
	}{
		{name: "none"},
		{name: "file", file: write("ok", testToken+"\n"), want: testToken},
		{name: "file over env", file: write("ok2", "  "+testToken+"  \nsecond line\n"), env: "other-token-0123456789", want: testToken},
		{name: "env", env: testToken, want: testToken},
		{name: "short file", file: write("short", "abc\n"), err: "at least 16"},
		{name: "short env", env: "abc", err: "at least 16"},
		{name: "inner space", file: write("space", "abcdefgh ijklmnopq\n"), err: "space or a control"},
		{name: "missing file", file: filepath.Join(dir, "missing"), err: "token file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(tokenEnv, c.env)
			got, err := loadToken(c.file)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("loadToken: %q, %v; want an error with %q", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("loadToken: %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// Without a token, serve listens only on a loopback address, unless
// --insecure; it refuses before opening the store.
func TestServeRefusesANonLoopbackAddressWithoutATokenUnlessInsecure(t *testing.T) {
	cases := []struct {
		ip       string
		token    string
		insecure bool
		ok       bool
	}{
		{ip: "127.0.0.1", ok: true},
		{ip: "127.0.0.2", ok: true},
		{ip: "::1", ok: true},
		{ip: "0.0.0.0"},
		{ip: "::"},
		{ip: "192.0.2.7"},
		{ip: "0.0.0.0", token: testToken, ok: true},
		{ip: "192.0.2.7", insecure: true, ok: true},
	}
	for _, c := range cases {
		err := checkListenAddr(&net.TCPAddr{IP: net.ParseIP(c.ip), Port: 7070}, c.token, c.insecure)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, errNotLoopback)) {
			t.Errorf("%s token=%t insecure=%t: %v, want ok=%t", c.ip, c.token != "", c.insecure, err, c.ok)
		}
	}
	t.Setenv(tokenEnv, "")
	data := filepath.Join(t.TempDir(), "data")
	var out, errOut bytes.Buffer
	err := run([]string{"serve", "--data", data, "--addr", "0.0.0.0:0"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("serve on 0.0.0.0 without a token: %v", err)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("the refused serve created its data directory: %v", err)
	}
}

// With --tls-cert and --tls-key, serve speaks HTTPS with that certificate.
func TestServeSpeaksTLSWithTheGivenCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	store, err := execstore.Open(filepath.Join(dir, "data"), execstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveHTTP(ctx, ln, store, slog.New(slog.DiscardHandler), serveConfig{token: testToken, tlsCert: certFile, tlsKey: keyFile})
	}()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("GET", "https://"+ln.Addr().String()+"/v1/stats", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("HTTPS request: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Fatalf("HTTPS /v1/stats: %d, TLS %v", resp.StatusCode, resp.TLS != nil)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serveHTTP: %v", err)
	}
	var out, errOut bytes.Buffer
	err = run([]string{"serve", "--data", filepath.Join(dir, "d2"), "--tls-cert", certFile}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "go together") {
		t.Errorf("--tls-cert without --tls-key: %v", err)
	}
	err = run([]string{"serve", "--data", filepath.Join(dir, "d2"), "--tls-cert", keyFile, "--tls-key", keyFile}, &out, &errOut)
	if err == nil {
		t.Error("serve with a key as its certificate started")
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "execstore test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
