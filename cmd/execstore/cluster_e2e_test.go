package main

import (
	"bufio"
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
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A three-node cluster of the real binary on loopback TCP: any node takes
// any request (followers forward to the leader), an HTTP client written in
// another language works against a follower, the leader is killed with
// SIGKILL mid-workload and a new one takes over with nothing acknowledged
// lost, and the killed node restarts from its directory and catches up.
func TestAClusterOfTheBinarySurvivesItsLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "execstore")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	raftAddrs := freePorts(t, 3)
	var peers []string
	for i, a := range raftAddrs {
		peers = append(peers, fmt.Sprintf("n%d=%s", i, a))
	}
	nodes := make([]*binNode, 3)
	for i := range nodes {
		nodes[i] = &binNode{t: t, bin: bin, args: []string{"serve", "--data", filepath.Join(dir, fmt.Sprint("n", i)),
			"--addr", "127.0.0.1:0", "--node-id", fmt.Sprint("n", i), "--raft-addr", raftAddrs[i],
			"--peers", strings.Join(peers, ",")}}
		nodes[i].start()
	}
	leader := waitBinLeader(t, nodes)

	// Another language's client, against a follower.
	var follower *binNode
	for _, n := range nodes {
		if n != leader {
			follower = n
			break
		}
	}
	if python, err := exec.LookPath("python3"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, python, "../../examples/python/worker.py", "http://"+follower.addr, "order-7").CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(out), "acknowledged order-7: completed\n") {
			t.Fatalf("worker.py against a follower: %v\n%s", err, out)
		}
	} else if os.Getenv("CI") != "" {
		t.Fatal("python3 is not installed; .ci/run installs it")
	}

	// Admissions through every node; each is acknowledged.
	acked := map[string]bool{}
	for i := range 30 {
		id := fmt.Sprint("job-", i)
		if code := admitOver(t, nodes[i%3].addr, id); code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("admit %s through %s: %d", id, nodes[i%3].args[7], code)
		}
		acked[id] = true
	}

	// The leader is killed; the others go on once they elected a new one.
	leader.kill()
	killedAt := time.Now()
	var survivors []*binNode
	for _, n := range nodes {
		if n != leader {
			survivors = append(survivors, n)
		}
	}
	var failover time.Duration
	for i := 30; i < 60; i++ {
		id := fmt.Sprint("job-", i)
		deadline := time.Now().Add(patience)
		for {
			code := admitOver(t, survivors[i%2].addr, id)
			// A conflict: an earlier try whose answer was lost took effect.
			if code == http.StatusCreated || code == http.StatusOK || code == http.StatusConflict {
				break
			}
			if code != http.StatusServiceUnavailable && code != 0 {
				t.Fatalf("admit %s after the kill: %d", id, code)
			}
			if time.Now().After(deadline) {
				t.Fatalf("no write succeeded within %v of the leader's kill", patience)
			}
			time.Sleep(20 * time.Millisecond) // an election takes a while; ask again
		}
		if failover == 0 {
			failover = time.Since(killedAt)
		}
		acked[id] = true
	}
	t.Logf("failover: the leader killed to the first admission acknowledged: %v", failover)
	for id := range acked {
		var rec struct {
			ExecutionID string `json:"executionId"`
		}
		if code := getOver(t, survivors[0].addr, "/v1/executions/"+id, &rec); code != http.StatusOK || rec.ExecutionID != id {
			t.Fatalf("acknowledged admission %s after the failover: %d", id, code)
		}
	}

	// The killed node restarts from its directory and catches up.
	leader.start()
	newLeader := waitBinLeader(t, nodes)
	var lc clusterJSON
	getOver(t, newLeader.addr, "/v1/cluster", &lc)
	// Compared with the leader's applied index, not its commit index: raft's
	// no-op of the new leader's term is committed and reaches no state
	// machine, so with no write after the election a commit index is never
	// applied.
	eventually(t, "the restarted node applied what the leader applied", func() bool {
		var c clusterJSON
		return getOver(t, leader.addr, "/v1/cluster", &c) == http.StatusOK && c.Applied >= lc.Applied
	})
	for _, n := range nodes {
		n.stop()
	}
}

// binNode is one serve process of the test's cluster.
type binNode struct {
	t      *testing.T
	bin    string
	args   []string
	cmd    *exec.Cmd
	addr   string
	exited chan error
}

func (n *binNode) start() {
	n.t.Helper()
	n.cmd = exec.Command(n.bin, n.args...)
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.exited = make(chan error, 1)
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		serving := regexp.MustCompile(`"msg":"execstore: serving","addr":"([^"]+)"`)
		for sc.Scan() {
			if m := serving.FindStringSubmatch(sc.Text()); m != nil {
				addrs <- m[1]
			}
		}
		n.exited <- n.cmd.Wait()
	}()
	cmd := n.cmd
	n.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	select {
	case n.addr = <-addrs:
	case err := <-n.exited:
		n.t.Fatalf("%v exited before serving: %v", n.args, err)
	case <-time.After(patience):
		n.t.Fatalf("%v never said where it listens", n.args)
	}
}

func (n *binNode) kill() {
	n.cmd.Process.Kill()
	<-n.exited
}

func (n *binNode) stop() {
	n.t.Helper()
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-n.exited:
		if err != nil {
			n.t.Errorf("%v exited with %v", n.args, err)
		}
	case <-time.After(patience):
		n.t.Errorf("%v did not stop on SIGTERM", n.args)
	}
}

// waitBinLeader waits until every running node names the same leader, and
// returns it.
func waitBinLeader(t *testing.T, nodes []*binNode) *binNode {
	t.Helper()
	var leader *binNode
	eventually(t, "the nodes agree on a leader", func() bool {
		leader = nil
		id := ""
		for _, n := range nodes {
			var c clusterJSON
			if getOver(t, n.addr, "/v1/cluster", &c) != http.StatusOK || c.LeaderID == "" || (id != "" && c.LeaderID != id) {
				return false
			}
			id = c.LeaderID
			if c.State == "Leader" {
				leader = n
			}
		}
		return leader != nil
	})
	return leader
}

// admitOver admits id through the API at addr and returns the status; 0
// when the node cannot be reached.
func admitOver(t *testing.T, addr, id string) int {
	t.Helper()
	body := fmt.Sprintf(`{"executionId":%q,"workflowId":"wf"}`, id)
	resp, err := http.Post("http://"+addr+"/v1/executions", "application/json", bytes.NewBufferString(body))
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// getOver GETs path from the API at addr into out; it returns the status, 0
// when the node cannot be reached.
func getOver(t *testing.T, addr, path string, out any) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	return resp.StatusCode
}

// freePorts returns n loopback addresses whose ports were free a moment ago.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

// eventually polls cond until it holds, and fails the test if it does not
// within patience.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
