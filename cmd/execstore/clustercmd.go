package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/replica"
)

// replicaFlags are serve's flags for running a node of a replicated store.
type replicaFlags struct {
	nodeID, raftAddr, raftAdvertise, apiURL, peers, join string
	stale                                                bool
}

func (rf *replicaFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&rf.nodeID, "node-id", "", "run as a node of a replicated cluster with this ID, unique in the cluster and the same across restarts")
	fs.StringVar(&rf.raftAddr, "raft-addr", "", "with --node-id: the address raft listens on, HOST:PORT")
	fs.StringVar(&rf.raftAdvertise, "raft-advertise", "", "with --node-id: the raft address other nodes dial (default: --raft-addr)")
	fs.StringVar(&rf.apiURL, "api-url", "", "with --node-id: the URL of this node's API that followers forward to (default: http(s)://--addr)")
	fs.StringVar(&rf.peers, "peers", "", "with --node-id: on the first start, bootstrap a new cluster of these voters, ID=HOST:PORT,... (this node among them)")
	fs.StringVar(&rf.join, "join", "", "with --node-id: ask the cluster whose API is at this URL (any node) to add this node as a voter")
	fs.BoolVar(&rf.stale, "stale-reads", false, "with --node-id: answer reads from this node's state, possibly behind the leader's, instead of forwarding them")
}

// check refuses flags that do not go together.
func (rf *replicaFlags) check() error {
	if rf.nodeID == "" {
		if rf.raftAddr != "" || rf.raftAdvertise != "" || rf.apiURL != "" || rf.peers != "" || rf.join != "" || rf.stale {
			return errors.New("--raft-addr, --raft-advertise, --api-url, --peers, --join and --stale-reads need --node-id")
		}
		return nil
	}
	if err := checkMember(rf.nodeID, "-"); err != nil {
		return err
	}
	if rf.raftAddr == "" {
		return errors.New("--node-id needs --raft-addr")
	}
	if rf.peers != "" && rf.join != "" {
		return errors.New("--peers bootstraps a new cluster and --join joins a running one: give one")
	}
	_, err := parsePeers(rf.peers)
	return err
}

// parsePeers parses ID=HOST:PORT,... into voters.
func parsePeers(s string) ([]execstore.Peer, error) {
	if s == "" {
		return nil, nil
	}
	var out []execstore.Peer
	seen := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			return nil, fmt.Errorf("--peers: %q is not ID=HOST:PORT", p)
		}
		if err := checkMember(id, addr); err != nil {
			return nil, fmt.Errorf("--peers: %w", err)
		}
		if seen[id] {
			return nil, fmt.Errorf("--peers: %q is given twice", id)
		}
		seen[id] = true
		out = append(out, execstore.Peer{ID: id, Addr: addr, Voter: true})
	}
	return out, nil
}

// open opens the node's replicated store; apiURL is where followers forward
// to unless --api-url says otherwise.
func (rf *replicaFlags) open(dir string, opts execstore.Options, apiURL string) (*execstore.Store, error) {
	peers, err := parsePeers(rf.peers)
	if err != nil {
		return nil, err
	}
	if rf.apiURL != "" {
		apiURL = rf.apiURL
	}
	return execstore.OpenReplicated(dir, execstore.ReplicaOptions{
		Options:    opts,
		Node:       replica.NodeOptions{ID: rf.nodeID, BindAddr: rf.raftAddr, AdvertiseAddr: rf.raftAdvertise, Meta: apiURL},
		Peers:      peers,
		StaleReads: rf.stale,
	})
}

// joinPatience bounds how long a node keeps asking to be added.
const joinPatience = 2 * time.Minute

// joinCluster asks the cluster at url to add this node as a voter, again
// every second until it is done (the cluster may be electing, or the node
// it asks not started yet), within joinPatience. A node already a member at
// this address is added again, which changes nothing.
func joinCluster(ctx context.Context, url, token string, store *execstore.Store, logger *slog.Logger) {
	node := store.Node()
	body := addMemberBody{ID: node.ID(), RaftAddr: node.Addr()}
	deadline := time.Now().Add(joinPatience)
	for attempt := 1; ; attempt++ {
		var out clusterJSON
		err := clusterCall(ctx, http.MethodPost, url, "/v1/cluster/members", token, body, &out)
		if err == nil {
			logger.Info("execstore: joined the cluster", "via", url, "leader", out.LeaderID, "members", len(out.Members))
			return
		}
		if ctx.Err() != nil {
			return
		}
		if time.Now().After(deadline) {
			logger.Error("execstore: gave up joining the cluster", "via", url, "attempts", attempt, "err", err)
			return
		}
		if attempt == 1 || attempt%10 == 0 {
			logger.Info("execstore: asking to join the cluster; trying again", "via", url, "attempt", attempt, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// answerBytesMax bounds how much of an answer clusterCall reads: a cluster's
// view is a few hundred bytes a member.
const answerBytesMax = 4 << 20

// clusterCall sends one request to a node's API and decodes its JSON answer
// into out; an error answer becomes an error with its code and message.
func clusterCall(ctx context.Context, method, base, path, token string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, answerBytesMax))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e errorJSONBody
		if json.Unmarshal(b, &e) == nil && e.Code != "" {
			return fmt.Errorf("%s %s: %d %s: %s", method, path, resp.StatusCode, e.Code, e.Message)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

const clusterUsage = `usage: execstore cluster <command> [flags]

commands:
  start    run a local cluster of N nodes in this process, for trials
  status   show a node's view of its cluster
  add      add a voting member (on the leader; any node forwards)
  remove   remove a member (on the leader; any node forwards), then show
           the node's view once it has applied the removal

run "execstore cluster <command> -h" for a command's flags.
`

// clusterCommand runs the cluster subcommands.
func clusterCommand(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, clusterUsage)
		return errors.New("cluster: no command given")
	}
	switch args[0] {
	case "start":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return clusterStart(ctx, args[1:], stdout, stderr)
	case "status", "add", "remove":
		return clusterAdmin(args[0], args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, clusterUsage)
		return nil
	}
	fmt.Fprint(stderr, clusterUsage)
	return fmt.Errorf("cluster: unknown command %q", args[0])
}

// clusterAdmin asks a running cluster's API: status, add or remove.
func clusterAdmin(cmd string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cluster "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	api := fs.String("api", "http://127.0.0.1:7070", "the API URL of any node of the cluster")
	tokenFile := fs.String("token-file", "", "the API's token, on this file's first line (or in $"+tokenEnv+")")
	var id, raftAddr *string
	if cmd != "status" {
		id = fs.String("node-id", "", "the member's node ID")
	}
	if cmd == "add" {
		raftAddr = fs.String("raft-addr", "", "the member's raft address, HOST:PORT")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	token, err := loadToken(*tokenFile)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", cmd, err)
	}
	ctx := context.Background()
	var out clusterJSON
	switch cmd {
	case "add":
		if err := checkMember(*id, *raftAddr); err != nil {
			return fmt.Errorf("cluster add: %w", err)
		}
		err = clusterCall(ctx, http.MethodPost, *api, "/v1/cluster/members", token, addMemberBody{ID: *id, RaftAddr: *raftAddr}, &out)
	case "remove":
		if err := checkMember(*id, "-"); err != nil {
			return fmt.Errorf("cluster remove: %w", err)
		}
		if err = clusterCall(ctx, http.MethodDelete, *api, "/v1/cluster/members/"+*id, token, nil, nil); err == nil {
			err = viewWithout(ctx, *api, token, *id, removalSeen, &out, stderr)
		}
	default:
		err = clusterCall(ctx, http.MethodGet, *api, "/v1/cluster", token, nil, &out)
	}
	if err != nil {
		return fmt.Errorf("cluster %s: %w", cmd, err)
	}
	printCluster(stdout, &out)
	return nil
}

// removalSeen bounds how long `cluster remove` waits for the node it asked
// to list the members without the one removed.
const removalSeen = 5 * time.Second

// viewWithout reads the node's view of the cluster (GET /v1/cluster) until it
// no longer lists member id, for up to bound. The removal was
// committed when the leader answered, but a follower learns of it only when
// the entry reaches it: without the wait, a command that asked a follower
// would print the member it had just removed. After the bound it prints the
// view as it is and says so on stderr.
func viewWithout(ctx context.Context, api, token, id string, bound time.Duration, out *clusterJSON, stderr io.Writer) error {
	deadline := time.Now().Add(bound)
	for {
		*out = clusterJSON{}
		if err := clusterCall(ctx, http.MethodGet, api, "/v1/cluster", token, nil, out); err != nil {
			return err
		}
		listed := slices.ContainsFunc(out.Members, func(m memberJSON) bool { return m.ID == id })
		if !listed {
			return nil
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "cluster remove: the removal of %s is committed, but node %s has not applied it after %v; its view below still lists it\n", id, out.NodeID, bound)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func printCluster(w io.Writer, c *clusterJSON) {
	if !c.Replicated {
		fmt.Fprintln(w, "not replicated: a single-node store")
		return
	}
	fmt.Fprintf(w, "node %s: %s, term %d, applied %d, commit %d\n", c.NodeID, c.State, c.Term, c.Applied, c.Commit)
	if c.LeaderID == "" {
		fmt.Fprintln(w, "leader: none known")
	} else {
		fmt.Fprintf(w, "leader: %s %s\n", c.LeaderID, c.LeaderAPI)
	}
	for _, m := range c.Members {
		kind := "voter"
		if !m.Voter {
			kind = "nonvoter"
		}
		fmt.Fprintf(w, "member %s %s %s\n", m.ID, m.RaftAddr, kind)
	}
}

// clusterStart runs a local cluster for trials: N replicated stores in one
// process, each with its data directory (DIR/node-I), raft on 127.0.0.1
// raft-port+I and its API on 127.0.0.1 port+I, bootstrapped together, until
// SIGINT or SIGTERM (ctx ends). Any node's API takes any request (followers
// forward to the leader).
func clusterStart(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cluster start", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 3, "nodes in the cluster (1 to 9)")
	data := fs.String("data", "./execstore-cluster", "the directory that holds each node's data directory (created if needed)")
	port := fs.Int("port", 7070, "the first node's API port; node I listens on port+I (0: ports the system chooses)")
	raftPort := fs.Int("raft-port", 7000, "the first node's raft port; node I listens on raft-port+I (0: ports the system chooses)")
	noSync := fs.Bool("nosync", false, "skip fsync (faster; a crash of the machine may lose acknowledged writes)")
	logLevel := fs.String("log-level", "warn", "the least level logged (JSON lines on stderr): debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nodes < 1 || *nodes > 9 {
		return fmt.Errorf("cluster start: --nodes %d is outside 1..9", *nodes)
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return fmt.Errorf("cluster start: %w", err)
	}
	at := func(base, i int) string {
		if base == 0 {
			return "127.0.0.1:0"
		}
		return fmt.Sprintf("127.0.0.1:%d", base+i)
	}
	type member struct {
		ln    net.Listener
		raft  net.Listener
		store *execstore.Store
	}
	ms := make([]member, *nodes)
	closeAll := func() {
		for _, m := range ms {
			if m.ln != nil {
				m.ln.Close()
			}
			if m.raft != nil {
				m.raft.Close()
			}
			if m.store != nil {
				m.store.Close()
			}
		}
	}
	// Every port is taken first, so that the peers are known before any
	// node starts; raft's is released just before its node binds it.
	var peers []execstore.Peer
	for i := range ms {
		if ms[i].ln, err = net.Listen("tcp", at(*port, i)); err == nil {
			ms[i].raft, err = net.Listen("tcp", at(*raftPort, i))
		}
		if err != nil {
			closeAll()
			return fmt.Errorf("cluster start: %w", err)
		}
		peers = append(peers, execstore.Peer{ID: fmt.Sprintf("node-%d", i), Addr: ms[i].raft.Addr().String(), Voter: true})
	}
	for i := range ms {
		ms[i].raft.Close()
		ms[i].raft = nil
		rf := replicaFlags{nodeID: peers[i].ID, raftAddr: peers[i].Addr}
		dir := filepath.Join(*data, peers[i].ID)
		ms[i].store, err = rf.open(dir, execstore.Options{NoSync: *noSync, Logger: logger}, "http://"+ms[i].ln.Addr().String())
		if err != nil {
			closeAll()
			return fmt.Errorf("cluster start: %s: %w", peers[i].ID, err)
		}
		if err := ms[i].store.Node().Bootstrap(peers); err != nil && !errors.Is(err, replica.ErrBootstrapped) {
			closeAll()
			return fmt.Errorf("cluster start: %s: %w", peers[i].ID, err)
		}
	}
	first := ms[0].store.Node()
	apis := make([]string, len(ms))
	errc := make(chan error, len(ms))
	for i := range ms {
		m := ms[i]
		apis[i] = "http://" + m.ln.Addr().String()
		ms[i] = member{} // serveHTTP closes the listener and the store
		go func() { errc <- serveHTTP(ctx, m.ln, m.store, logger, serveConfig{}) }()
	}
	fmt.Fprintf(stdout, "a cluster of %d nodes, data in %s:\n", len(peers), *data)
	for i, p := range peers {
		fmt.Fprintf(stdout, "  %s  api %s  raft %s\n", p.ID, apis[i], p.Addr)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if id, _, err := first.WaitLeader(wctx); err == nil {
		fmt.Fprintf(stdout, "leader: %s; any node takes any request (followers forward); stop with Ctrl-C\n", id)
	} else {
		fmt.Fprintf(stdout, "no leader yet (%v); stop with Ctrl-C\n", err)
	}
	cancel()
	var firstErr error
	for range ms {
		if err := <-errc; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}
