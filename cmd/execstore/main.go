// Command execstore serves, inspects and exercises an execstore data
// directory.
//
//	execstore serve [--data DIR] [--addr HOST:PORT] [--nosync]
//	                [--token-file FILE] [--insecure] [--tls-cert FILE --tls-key FILE]
//	                [--node-id ID --raft-addr HOST:PORT [--peers ID=HOST:PORT,...]
//	                 [--join URL] [--api-url URL] [--raft-advertise HOST:PORT] [--stale-reads]]
//
// serve opens the store kept in DIR (default ./execstore-data) and serves
// its HTTP API on HOST:PORT (default 127.0.0.1:7070) until SIGINT or SIGTERM,
// then drains requests and closes the store cleanly. With a token (from
// --token-file or EXECSTORE_TOKEN) every route but /healthz requires
// "Authorization: Bearer <token>"; without one, serve listens only on a
// loopback address unless --insecure is given. The routes are described
// by openapi.yaml at the repository root, which serve answers as JSON at
// GET /v1/openapi.json, and listed in the README.
//
// With --node-id, serve runs one node of a replicated cluster (see the
// README's "Running a cluster" and cluster.go): raft on --raft-addr,
// bootstrapped with --peers on the first start or added to a running
// cluster with --join; a follower forwards what needs the leader.
//
//	execstore cluster start --nodes 3 [--data DIR] [--port 7070] [--raft-port 7000]
//	execstore cluster status|add|remove --api URL ...
//
// cluster start runs a local cluster in one process for trials; the other
// cluster commands ask a running cluster's API.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/metrics"
)

const usage = `usage: execstore <command> [flags]

commands:
  serve     serve the store's HTTP API until SIGINT/SIGTERM
  inspect   look inside a copy of a data directory: summary, get, list, wal dump, verify
  demo      run the shop's charge-order story on an embedded store
  sim       run the deterministic crash simulator over many seeds
  cluster   run a local cluster of replicated nodes, or show and change a cluster's members

run "execstore <command> -h" for a command's flags.
`

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "execstore:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "inspect":
		return inspect(args[1:], stdout, stderr)
	case "demo":
		return demoCommand(args[1:], stdout, stderr)
	case "sim":
		return simCommand(args[1:], stdout, stderr)
	case "cluster":
		return clusterCommand(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

func serve(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "./execstore-data", "the store's data directory (created if needed)")
	addr := fs.String("addr", "127.0.0.1:7070", "the address to listen on")
	noSync := fs.Bool("nosync", false, "skip fsync (faster; a crash of the machine may lose acknowledged writes)")
	groupWait := fs.Duration("group-wait", 0, "how long the writer may wait, before a durable batch, for the callers it just answered, so that one fsync carries them all: 0 for half the latest fsync (at most 500µs), negative for never, at most "+execstore.GroupWaitMax.String()+"; a node of a cluster (--node-id) does not wait")
	tokenFile := fs.String("token-file", "", "require \"Authorization: Bearer <token>\" with the token on this file's first line (or in $"+tokenEnv+")")
	insecure := fs.Bool("insecure", false, "serve without a token on an address other than loopback")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS with this certificate file (PEM; with --tls-key)")
	tlsKey := fs.String("tls-key", "", "the private key file of --tls-cert (PEM)")
	logLevel := fs.String("log-level", "info", "the least level logged (JSON lines on stderr): debug, info, warn or error")
	retention := fs.Duration("retention", 0, "retire a terminal execution this long after it ended: its params, context and steps are dropped, its ID, status and outcome kept; 0 keeps everything")
	archive := fs.Bool("archive", false, "with --retention, move retired executions out of memory to an archive on disk (the data directory's archive/), so memory and restarts follow the live set; not for a node of a cluster")
	forgetAfter := fs.Duration("forget-after", 0, "with --archive, forget an archived execution this long after it ended, and delete it from the archive: its ID may then be admitted again; 0 keeps every archived execution forever")
	var rf replicaFlags
	rf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := rf.check(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return errors.New("serve: --tls-cert and --tls-key go together")
	}
	if *groupWait > execstore.GroupWaitMax {
		return fmt.Errorf("serve: --group-wait %v is more than %v", *groupWait, execstore.GroupWaitMax)
	}
	if err := checkRetention(*retention, *archive, *forgetAfter, rf.nodeID != ""); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if *tlsCert != "" {
		if _, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	token, err := loadToken(*tokenFile)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if err := checkListenAddr(ln.Addr(), token, *insecure); err != nil {
		ln.Close()
		return fmt.Errorf("serve: %w", err)
	}
	m := metrics.New()
	opts := execstore.Options{NoSync: *noSync, GroupWait: *groupWait, Logger: logger, Metrics: m,
		Retention: *retention, Archive: *archive, ForgetAfter: *forgetAfter}
	var store *execstore.Store
	if rf.nodeID != "" {
		scheme := "http"
		if *tlsCert != "" {
			scheme = "https"
		}
		if ta, ok := ln.Addr().(*net.TCPAddr); ok && ta.IP.IsUnspecified() && rf.apiURL == "" {
			ln.Close()
			return fmt.Errorf("serve: --addr %s listens on every address; give --api-url, the URL other nodes forward to", *addr)
		}
		store, err = rf.open(*data, opts, scheme+"://"+ln.Addr().String())
	} else {
		store, err = execstore.Open(*data, opts)
	}
	if err != nil {
		ln.Close()
		return err
	}
	m.Watch(store)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if rf.join != "" {
		go joinCluster(ctx, rf.join, token, store, logger)
	}
	return serveHTTP(ctx, ln, store, logger, serveConfig{token: token, tlsCert: *tlsCert, tlsKey: *tlsKey,
		metrics: newRegistry(m), staleReads: rf.stale})
}

// checkRetention checks serve's --retention, --archive and --forget-after
// before anything is opened.
func checkRetention(retention time.Duration, archive bool, forgetAfter time.Duration, clustered bool) error {
	switch {
	case retention < 0:
		return fmt.Errorf("--retention %v is negative", retention)
	case forgetAfter < 0:
		return fmt.Errorf("--forget-after %v is negative", forgetAfter)
	case forgetAfter > 0 && !archive:
		return errors.New("--forget-after forgets archived executions: give --archive too")
	case forgetAfter > 0 && forgetAfter <= retention:
		return fmt.Errorf("--forget-after %v must exceed --retention %v: an execution is archived first, then forgotten", forgetAfter, retention)
	case archive && retention == 0:
		return errors.New("--archive keeps the executions --retention retires: give --retention too")
	case archive && clustered:
		return errors.New("--archive is for a single node: a node of a cluster keeps its retired executions in memory")
	}
	return nil
}

// serveUntil serves the API on ln until ctx ends, without a token or TLS
// (see serveHTTP).
func serveUntil(ctx context.Context, ln net.Listener, store *execstore.Store, logger *slog.Logger) error {
	return serveHTTP(ctx, ln, store, logger, serveConfig{})
}

// serveConfig is what serve's flags add to the API.
type serveConfig struct {
	token           string              // "" for none
	tlsCert, tlsKey string              // both or neither
	metrics         prometheus.Gatherer // what /metrics exports; nil: the store's gauges alone
	staleReads      bool                // a replica answers GETs from its own state (cluster.go)
	drain           <-chan struct{}     // closed as the server starts shutting down (set by serveHTTP)
}

// serveHTTP serves the API on ln until ctx ends, then shuts down: it stops
// accepting, lets requests in flight finish (up to ten seconds), and closes
// the store.
func serveHTTP(ctx context.Context, ln net.Listener, store *execstore.Store, logger *slog.Logger, cfg serveConfig) error {
	drain := make(chan struct{})
	cfg.drain = drain
	srv := &http.Server{
		Handler:           newHandler(store, logger, cfg),
		ReadHeaderTimeout: 10 * time.Second,
		// A request's body must arrive within ReadTimeout (a body is at
		// most its route's limit, limits.go: at the default Limits a
		// commit's is 14 MB, and an acknowledgement batch's, whose strings
		// could all be escaped, 458 MB, which then must arrive at 15 MB/s);
		// an idle keep-alive connection is closed after IdleTimeout. No
		// write timeout: await and the change feed answer after up to 60 s
		// by design.
		ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ErrorLog:    slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(func() { close(drain) })
	errc := make(chan error, 1)
	scheme := "http"
	if cfg.tlsCert != "" {
		scheme = "https"
		go func() { errc <- srv.ServeTLS(ln, cfg.tlsCert, cfg.tlsKey) }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	logger.Info("execstore: serving", "addr", ln.Addr().String(), "scheme", scheme, "token", cfg.token != "")
	var serveErr error
	select {
	case <-ctx.Done():
		logger.Info("execstore: shutting down")
	case serveErr = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && serveErr == nil {
		serveErr = err
	}
	if err := store.Close(); err != nil && serveErr == nil {
		serveErr = err
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}
