package replica

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// A node's raft port carries two services: raft's RPCs, and a one-question
// service that answers with the node's Meta (NodeOptions.Meta: a replicated
// store puts its HTTP API's URL there), so that a follower can tell a client
// where the leader's API is from the leader's raft address alone, which is
// all raft's configuration holds, with no second discovery system and
// nothing outside the state machine's commands in its log.
//
// Every connection opens with one byte that names its service:
//
//	'R'  raft: the rest is raft's NetworkTransport protocol, both ways
//	'M'  meta: the server answers uvarint(len(meta)) meta and closes
//
// Any other first byte, or none within the transport's timeout, closes the
// connection.
const (
	serviceRaft byte = 'R'
	serviceMeta byte = 'M'
)

// MaxMetaBytes bounds NodeOptions.Meta and what PeerMeta accepts.
const MaxMetaBytes = 1024

// muxLayer is the raft.StreamLayer of a node's TCP port: it accepts every
// connection, routes it by its first byte, and gives raft only its own.
type muxLayer struct {
	ln        net.Listener
	advertise net.Addr
	meta      string

	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	mu      sync.Mutex
	pending map[net.Conn]struct{} // accepted, service byte not read yet
}

// Bounds on connections that have not named their service: a peer's raft
// dial names it at once, so a connection that does not within
// firstByteTimeout, or one past maxPending such, is closed. An idle flood
// thus costs at most maxPending descriptors for a moment.
const (
	firstByteTimeout = 2 * time.Second
	maxPending       = 128
)

func newMuxLayer(bind string, advertise net.Addr, meta string) (*muxLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	return newMuxLayerOn(ln, advertise, meta)
}

// newMuxLayerOn is newMuxLayer on a listener already bound.
func newMuxLayerOn(ln net.Listener, advertise net.Addr, meta string) (*muxLayer, error) {
	m := &muxLayer{ln: ln, advertise: advertise, meta: meta,
		conns: make(chan net.Conn), done: make(chan struct{}), pending: map[net.Conn]struct{}{}}
	addr, ok := m.Addr().(*net.TCPAddr)
	if !ok || addr.IP == nil || addr.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("%w: %s cannot be dialled by other nodes: give AdvertiseAddr", ErrNodeOptions, m.Addr())
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m, nil
}

// acceptLoop accepts until Close. An accept that fails (out of file
// descriptors, a connection reset before it was taken) is tried again after a
// pause that doubles up to a second, as net/http's server does: a passing
// shortage never closes the node's port for good.
func (m *muxLayer) acceptLoop() {
	defer m.wg.Done()
	var pause time.Duration
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(pause):
			case <-m.done:
				return
			}
			continue
		}
		pause = 0
		m.mu.Lock()
		full := len(m.pending) >= maxPending
		if !full {
			m.pending[c] = struct{}{}
		}
		m.mu.Unlock()
		if full {
			c.Close()
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.route(c)
		}()
	}
}

// route reads a connection's service byte and serves it or hands it to raft.
func (m *muxLayer) route(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(firstByteTimeout))
	var b [1]byte
	_, err := io.ReadFull(c, b[:])
	m.mu.Lock()
	delete(m.pending, c)
	m.mu.Unlock()
	if err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	switch b[0] {
	case serviceRaft:
		select {
		case m.conns <- c:
		case <-m.done:
			c.Close()
		}
	case serviceMeta:
		c.SetWriteDeadline(time.Now().Add(firstByteTimeout))
		out := binary.AppendUvarint(nil, uint64(len(m.meta)))
		c.Write(append(out, m.meta...))
		c.Close()
	default:
		c.Close()
	}
}

// Accept returns the next raft connection.
func (m *muxLayer) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.done:
		return nil, net.ErrClosed
	}
}

// Close stops listening, closes the connections that have not named their
// service, and waits for the goroutines that route them; connections already
// handed to raft are raft's.
func (m *muxLayer) Close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
		err = m.ln.Close()
		m.mu.Lock()
		for c := range m.pending {
			c.Close()
		}
		m.mu.Unlock()
		m.wg.Wait()
	})
	return err
}

// Addr is the advertised address, else the one bound.
func (m *muxLayer) Addr() net.Addr {
	if m.advertise != nil {
		return m.advertise
	}
	return m.ln.Addr()
}

// Dial opens a raft connection to another node.
func (m *muxLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{serviceRaft}); err != nil {
		c.Close()
		return nil, err
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
}

// PeerMeta asks the node whose raft listens at addr for its Meta
// (NodeOptions.Meta), over its raft port. It works on any node of a cluster
// on TCP, for any node that runs: leader or not, member or not.
func PeerMeta(ctx context.Context, addr string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("replica: meta of %s: %w", addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	} else {
		c.SetDeadline(time.Now().Add(10 * time.Second))
	}
	if _, err := c.Write([]byte{serviceMeta}); err != nil {
		return "", fmt.Errorf("replica: meta of %s: %w", addr, err)
	}
	r := bufio.NewReader(c)
	n, err := binary.ReadUvarint(r)
	if err == nil && n > MaxMetaBytes {
		err = fmt.Errorf("%d bytes, more than %d", n, MaxMetaBytes)
	}
	if err != nil {
		return "", fmt.Errorf("replica: meta of %s: %w", addr, err)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("replica: meta of %s: %w", addr, err)
	}
	return string(b), nil
}

// LeaderMeta returns the ID and Meta of the leader this node knows of,
// asked over the leader's raft port (this node's own Meta when it leads). It
// returns a *NotLeaderError with Uncertain false and no leader when it knows
// none.
func (n *Node) LeaderMeta(ctx context.Context) (id, meta string, err error) {
	id, addr := n.Leader()
	if id == "" {
		return "", "", &NotLeaderError{}
	}
	if id == n.opts.ID {
		return id, n.opts.Meta, nil
	}
	n.metaMu.Lock()
	if n.metaAddr == addr && n.metaID == id {
		meta := n.metaVal
		n.metaMu.Unlock()
		return id, meta, nil
	}
	n.metaMu.Unlock()
	meta, err = PeerMeta(ctx, addr)
	if err != nil {
		return id, "", err
	}
	n.metaMu.Lock()
	n.metaID, n.metaAddr, n.metaVal = id, addr, meta
	n.metaMu.Unlock()
	return id, meta, nil
}

// ForgetLeaderMeta drops the leader's Meta LeaderMeta keeps, so that the next call asks the
// leader again (its Meta may have changed across a restart).
func (n *Node) ForgetLeaderMeta() {
	n.metaMu.Lock()
	n.metaID, n.metaAddr, n.metaVal = "", "", ""
	n.metaMu.Unlock()
}
