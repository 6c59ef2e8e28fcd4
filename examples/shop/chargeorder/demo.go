package chargeorder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
	"github.com/execstore/execstore/dispatcher/dispatchertest"
	"github.com/execstore/execstore/replica"
	"github.com/execstore/execstore/workflow"
)

// DemoOptions configure RunDemo.
type DemoOptions struct {
	// Dir is the store's directory (created if needed).
	Dir string
	// Wait is charge-order's wait. Default ten minutes.
	Wait time.Duration
	// Out receives the story. Nil discards it.
	Out io.Writer
	// Clock, if set, is a manual clock that the story advances by Wait when
	// it waits; nil means the system clock, and the story waits for real.
	Clock *dispatchertest.Clock
	// Logger receives the store's and the dispatcher's logs. Nil discards
	// them.
	Logger *slog.Logger
	// Replicas, when more than 1, tells the story on a cluster of that many
	// replicated stores on loopback TCP (each in Dir/node-I, a dispatcher and
	// a worker on every node), and stops the leader once order 42 waits: a
	// new leader is elected, and its dispatcher charges the card, once.
	Replicas int
}

// RunDemo tells the shop's story with a real store in opts.Dir and a
// dispatcher: order 42 triggers charge-order as order-42; a repeated trigger
// is refused; the wait passes and the card is charged once; a trigger that
// reuses order-42 for an added item is refused, and order-42-2 charges it.
func RunDemo(ctx context.Context, opts DemoOptions) error {
	if opts.Wait == 0 {
		opts.Wait = 10 * time.Minute
	}
	d, err := openDemo(opts)
	if err != nil {
		return err
	}
	defer d.close(ctx)
	if err := d.firstOrder(ctx); err != nil {
		return err
	}
	if err := d.addedItem(ctx); err != nil {
		return err
	}
	var total int
	for _, c := range d.shop.Statement() {
		total += c.Cents
		d.say("card statement: %s for %s (%s)", money(c.Cents), c.Key, c.Receipt)
	}
	d.say("charged %d times, %s in all, %d gateway requests", len(d.shop.Statement()), money(total), d.shop.GatewayCalls())
	return nil
}

// demo is the story's cast: a store, the shop, a worker behind a dispatcher,
// and a client.
type demo struct {
	opts DemoOptions
	out  io.Writer
	// workflowLines holds what the workflow printed until the story reaches
	// the point where it happened (see flush).
	workflowLines held
	store         *execstore.Store
	shop          *Shop
	dispatcher    *dispatcher.Dispatcher
	client        *workflow.Client
	// The cluster's nodes, with Replicas; store, dispatcher and client are
	// then the leader's.
	nodes []*demoNode
}

// demoNode is one node of the story's cluster.
type demoNode struct {
	store      *execstore.Store
	dispatcher *dispatcher.Dispatcher
}

func openDemo(opts DemoOptions) (*demo, error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	d := &demo{opts: opts, out: out, shop: NewShop()}
	if opts.Replicas > 1 {
		if err := d.openCluster(); err != nil {
			return nil, err
		}
		return d, nil
	}
	n, err := d.openNode(func(o execstore.Options) (*execstore.Store, error) { return execstore.Open(opts.Dir, o) })
	if err != nil {
		return nil, err
	}
	d.store, d.dispatcher, d.client = n.store, n.dispatcher, workflow.NewClient(n.store)
	return d, nil
}

// openNode opens a store with open and starts a worker for charge-order
// behind a dispatcher on it.
func (d *demo) openNode(open func(execstore.Options) (*execstore.Store, error)) (*demoNode, error) {
	now, clock := time.Now, dispatcher.SystemClock()
	if d.opts.Clock != nil {
		now, clock = d.opts.Clock.Now, d.opts.Clock
	}
	store, err := open(execstore.Options{Now: now, Logger: d.opts.Logger})
	if err != nil {
		return nil, err
	}
	worker := workflow.NewWorker(store, workflow.Options{Logger: d.opts.Logger})
	Register(worker, d.shop, Config{Wait: d.opts.Wait, Out: &d.workflowLines})
	disp, err := dispatcher.New(store, worker, dispatcher.Options{Clock: clock, Logger: d.opts.Logger})
	if err != nil {
		store.Close()
		return nil, err
	}
	disp.Start()
	return &demoNode{store: store, dispatcher: disp}, nil
}

// openCluster opens Replicas replicated stores on loopback TCP, bootstraps
// them as one cluster, and makes the leader's the story's store.
func (d *demo) openCluster() error {
	var peers []execstore.Peer
	for i := range d.opts.Replicas {
		id := fmt.Sprintf("node-%d", i)
		n, err := d.openNode(func(o execstore.Options) (*execstore.Store, error) {
			return execstore.OpenReplicated(filepath.Join(d.opts.Dir, id), execstore.ReplicaOptions{
				Options: o, Node: replica.NodeOptions{ID: id, BindAddr: "127.0.0.1:0"}})
		})
		if err != nil {
			d.close(context.Background())
			return err
		}
		d.nodes = append(d.nodes, n)
		peers = append(peers, execstore.Peer{ID: id, Addr: n.store.Node().Addr(), Voter: true})
	}
	for _, n := range d.nodes {
		if err := n.store.Node().Bootstrap(peers); err != nil && !errors.Is(err, replica.ErrBootstrapped) {
			d.close(context.Background())
			return err
		}
	}
	if _, err := d.followLeader(context.Background()); err != nil {
		d.close(context.Background())
		return err
	}
	return nil
}

// followLeader waits until a running node leads, and makes its store,
// dispatcher and a client on it the story's.
func (d *demo) followLeader(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		for _, n := range d.nodes {
			if n.store != nil && n.store.Node().State() == raft.Leader {
				d.store, d.dispatcher, d.client = n.store, n.dispatcher, workflow.NewClient(n.store)
				return n.store.Node().ID(), nil
			}
		}
		select {
		case <-time.After(10 * time.Millisecond): // an election takes a few hundred
		case <-ctx.Done():
			return "", fmt.Errorf("no node of the cluster was elected leader: %w", ctx.Err())
		}
	}
}

// failover, on a cluster, stops the leader while order 42 waits; the
// others elect a new one, whose dispatcher delivers the wake.
func (d *demo) failover(ctx context.Context) error {
	if len(d.nodes) == 0 {
		return nil
	}
	old := d.store.Node().ID()
	for _, n := range d.nodes {
		if n.store == d.store {
			n.dispatcher.Stop(ctx)
			n.store.Close()
			n.store, n.dispatcher = nil, nil
		}
	}
	id, err := d.followLeader(ctx)
	if err != nil {
		return err
	}
	d.say("   The leader, %s, stops. The other nodes elect %s, which holds every record %s held.", old, id, old)
	return nil
}

func (d *demo) close(ctx context.Context) {
	if len(d.nodes) > 0 {
		for _, n := range d.nodes {
			if n.store != nil {
				n.dispatcher.Stop(ctx)
				n.store.Close()
			}
		}
		return
	}
	d.dispatcher.Stop(ctx)
	d.store.Close()
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

// flush prints what the workflow printed so far, indented. The story calls
// it once it has seen the state the workflow's lines led to, so they come
// out in order however fast the workflow runs.
func (d *demo) flush() {
	for _, line := range d.workflowLines.take() {
		d.say("   %s", line)
	}
}

func (d *demo) firstOrder(ctx context.Context) error {
	// One customer's orders charge one at a time (an identical put writes
	// nothing, so every run may put it).
	if _, err := d.store.PutQueue(ctx, QueueSettings); err != nil {
		return err
	}
	d.shop.PlaceOrder(42, "ada", Item{Name: "book", Cents: 1800}, Item{Name: "pen", Cents: 700})
	d.say("1. Order 42 is placed (25.00). The shop triggers %s for it with execution ID order-42.", WorkflowID)
	if err := d.trigger(ctx, "order-42"); err != nil {
		return err
	}
	d.say("2. The shop's request timed out, so it sends the same trigger again.")
	if err := d.trigger(ctx, "order-42"); !errors.Is(err, execstore.ErrExecutionIDConflict) {
		return fmt.Errorf("the repeated trigger was not refused: %v", err)
	}
	if err := d.failover(ctx); err != nil {
		return err
	}
	d.say("3. %v later, the wake falls due and order-42 runs again from the top.", d.opts.Wait)
	return d.finish(ctx, "order-42")
}

func (d *demo) addedItem(ctx context.Context) error {
	d.shop.AddItem(42, Item{Name: "socks", Cents: 700})
	d.say("4. The customer adds socks (7.00). The shop triggers order-42 again, meaning a new charge.")
	if err := d.trigger(ctx, "order-42"); !errors.Is(err, execstore.ErrExecutionIDConflict) {
		return fmt.Errorf("the reused ID was not refused: %v", err)
	}
	d.say("   so the shop knows at once to use a new ID, order-42-2.")
	if err := d.trigger(ctx, "order-42-2"); err != nil {
		return err
	}
	d.say("5. %v later:", d.opts.Wait)
	return d.finish(ctx, "order-42-2")
}

// trigger triggers charge-order for order 42 as id and tells what happened.
// An admitted execution's first run suspends in its wait before trigger
// returns, so the story's lines come in order.
func (d *demo) trigger(ctx context.Context, id string) error {
	_, err := Trigger(ctx, d.client, d.shop, id, 42)
	if errors.Is(err, execstore.ErrExecutionIDConflict) {
		d.say("   trigger %s: refused with %s: %s exists, and nothing was queued", id, execstore.ErrorCode(err), id)
		return err
	}
	if err != nil {
		return err
	}
	d.say("   trigger %s: admitted", id)
	rec, err := d.waitFor(ctx, id, execstore.StatusSuspended)
	if err != nil {
		return err
	}
	d.flush()
	d.say("   %s: %s in its wait, in case the customer cancels; due at %s", id, rec.Status, rec.DueAt.Format("15:04:05.000 MST"))
	return nil
}

// finish lets the wait pass and waits for id's outcome.
func (d *demo) finish(ctx context.Context, id string) error {
	if d.opts.Clock != nil {
		d.opts.Clock.Advance(d.opts.Wait)
	}
	rec, err := d.client.Wait(ctx, id)
	if err != nil {
		return err
	}
	d.flush()
	res, err := workflow.Result[Result](rec)
	if err != nil {
		return fmt.Errorf("%s failed: %w", id, err)
	}
	d.say("   %s: %s, %s %s (receipt %s)", id, rec.Status, res.Status, money(res.Cents), res.Receipt)
	return nil
}

// waitFor waits until id's record has status s, or fails if it ends first. The store signals DueChanged
// when a suspended acknowledgement leaves a wake pending; the ticker is a
// fallback.
func (d *demo) waitFor(ctx context.Context, id string, s execstore.Status) (execstore.Record, error) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		changed := d.store.DueChanged()
		rec, err := d.store.Get(ctx, id)
		if err != nil || rec.Status == s {
			return rec, err
		}
		if rec.Status.Terminal() {
			// On the real clock a short wait can pass before the first look.
			return rec, fmt.Errorf("%s was %s before it was seen %s (is the wait shorter than the machine's delays?)", id, rec.Status, s)
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			return execstore.Record{}, ctx.Err()
		}
	}
}

// held keeps the lines written to it until they are taken.
type held struct {
	mu    sync.Mutex
	lines []string
}

// Write keeps p, one line (the workflow writes a line at a time).
func (h *held) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func (h *held) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.lines
	h.lines = nil
	return out
}
