package sim

import (
	"bytes"
	"errors"
	"fmt"
	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"

	"github.com/execstore/execstore/snapshot"
	"github.com/execstore/execstore/vfs"
)

// Errors the simulator returns to the store from its filesystem. errCrash
// stands for the machine losing power at that instant: the store's answer no
// longer matters, only the crash image taken before returning it.
var (
	errCrash = errors.New("sim: crash")
	errFault = errors.New("sim: injected storage error")
)

// crashPoint names a step of the log's or the snapshot package's write path
// where the simulator may crash the machine or fail the operation (see
// points): the event it records there.
type crashPoint struct {
	kind string // "before-write", "before-sync" or "after-sync", or one of the snap* kinds
	path string // what was synced or is written, relative to the store directory
}

// The snapshot package's crash points.
const (
	snapBeforeWrite = "snapshot before-write"
	snapBeforeSync  = "snapshot before-sync"
	snapAfterSync   = "snapshot after-sync"
)

// snapshot reports whether the event is in snapshot writing or pruning
// rather than in the log.
func (e crashPoint) snapshot() bool { return strings.HasPrefix(e.kind, "snapshot ") }

func (e crashPoint) String() string {
	if e.path == "" {
		return e.kind
	}
	return e.kind + " " + e.path
}

// traceName drops the part of a file name that is not deterministic: a torn
// tail's side file is named after the wall clock.
func traceName(rel string) string {
	if i := strings.LastIndexByte(rel, '-'); i > 0 && strings.Contains(rel, "/torn-") {
		return rel[:i] + "-*.bin"
	}
	return rel
}

// plan is an armed crash or storage fault: it fires at the at-th crash point
// (counting from 1) after it is armed.
type plan struct {
	at    int
	crash bool // crash: take an image, then fail the operation; fault: only fail it

	events int
	fired  *crashPoint
	image  *crashImage
	err    error // taking the image failed
}

// storage is the simulator's end of the store's filesystem: it connects the
// crash points to the durability tracker and to the armed plan. Its
// filesystem's operations run in the store's writer goroutine, its snapshot
// goroutine, or in Open; the driver reads the outcome only after a barrier.
type storage struct {
	mu   sync.Mutex
	disk *disk
	plan *plan
	rng  *rand.Rand // for the image; the driver does not draw while armed
	gate *gate      // holds the writer at the log's next write
	// points tells the store's crash points among its filesystem operations.
	points points
}

// gate holds the store's writer inside the log's next write: closed held
// says it is there, and it stays until release is closed.
type gate struct {
	held, release chan struct{}
}

// holdNext arms a gate for the log's next write.
func (h *storage) holdNext() *gate {
	g := &gate{held: make(chan struct{}), release: make(chan struct{})}
	h.mu.Lock()
	h.gate = g
	h.mu.Unlock()
	return g
}

// wait holds the calling writer at an armed gate until it is released.
func (h *storage) wait() {
	h.mu.Lock()
	g := h.gate
	h.gate = nil
	h.mu.Unlock()
	if g != nil {
		close(g.held)
		<-g.release
	}
}

// fs is the store's filesystem: the operating system's, with every
// operation reported to the simulator, which crashes the machine or fails
// the operation at its crash points (see points). The store prepares the
// next segment's file in the writer, right after the write that asks for it,
// as it does on any filesystem but the operating system's own: what the log
// directory holds, and so every crash image, does not depend on timing.
func (h *storage) fs() vfs.FS { return vfs.WithFaults(vfs.Default, h.op) }

// op is the simulator's side of the store's filesystem: it maps an operation
// to its crash point, if it is one, and records it. The writer is held at a
// gate (holdNext) at the log's next change of its directory.
func (h *storage) op(o vfs.Op) error {
	h.mu.Lock()
	d := h.disk
	var pt point
	if d != nil {
		rel, _ := d.rel(o.Path)
		pt = h.points.classify(o, rel)
	}
	h.mu.Unlock()
	if !pt.ok {
		return nil
	}
	if pt.ev.kind == "before-write" {
		h.wait()
	}
	err := h.event(pt.ev, pt.synced)
	if err != nil {
		h.mu.Lock()
		h.points.failed(pt.ev)
		h.mu.Unlock()
	}
	return err
}

// event records a crash point reached. An after-sync first makes what was
// synced durable: the fsync happened, whatever the simulator answers.
func (h *storage) event(ev crashPoint, synced string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.disk
	if d == nil {
		return nil
	}
	if synced != "" {
		if err := d.synced(synced); err != nil {
			return fmt.Errorf("sim: tracking an fsync: %w", err)
		}
		ev.path = synced
	}
	if ev.path != "" {
		if rel, ok := d.rel(ev.path); ok {
			ev.path = traceName(rel)
		} else {
			ev.path = filepath.Base(ev.path)
		}
	}
	p := h.plan
	if p == nil || p.fired != nil {
		return nil
	}
	p.events++
	if p.events < p.at {
		return nil
	}
	p.fired = &ev
	if !p.crash {
		if ev.snapshot() {
			// A failed fsync of the snapshot directory may have dropped the
			// entries it was to make durable.
			if ev.kind == snapBeforeSync && ev.path == "snapshots" {
				p.err = d.poison("snapshots")
			}
			return errFault
		}
		// Whatever the crash point stands for, the kernel may have dropped the last
		// segment's unsynced pages: a failed fsync leaves them clean.
		p.err = d.storageError()
		return errFault
	}
	p.image, p.err = d.image(h.rng)
	return errCrash
}

// arm installs a plan; disarm removes it and returns it.
func (h *storage) arm(p *plan) {
	h.mu.Lock()
	h.plan = p
	h.mu.Unlock()
}

func (h *storage) disarm() *plan {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.plan
	h.plan = nil
	return p
}

func (h *storage) setDisk(d *disk) {
	h.mu.Lock()
	h.disk = d
	h.points.reset()
	h.points.prepared = false
	h.mu.Unlock()
}

// setArchive gives the current disk its store's archive filesystem.
func (h *storage) setArchive(fs *pebblevfs.MemFS) {
	h.mu.Lock()
	h.disk.mu.Lock()
	h.disk.archive = fs
	h.disk.mu.Unlock()
	h.mu.Unlock()
}

// root is the current disk's directory, absolute.
func (h *storage) root() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.disk.root
}

// quiescentImage takes a crash image while no crash point can be reached (the
// store is idle).
func (h *storage) quiescentImage() (*crashImage, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.disk.image(h.rng)
}

// durableSnapshots lists the indexes of the snapshots every crash keeps whole:
// name and contents durable. (Nothing damages the live directory's files: a
// snapshot whose contents are durable reads back.)
func (h *storage) durableSnapshots() ([]uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.disk
	infos, err := snapshot.List(vfs.Default, filepath.Join(d.root, "snapshots"))
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, info := range infos {
		rel, _ := d.rel(info.Path)
		rec := d.files[rel]
		if rec == nil || !rec.entry {
			continue
		}
		cur, ok, err := d.current(rel)
		if err != nil {
			return nil, err
		}
		if ok && bytes.Equal(cur, rec.durable) {
			out = append(out, info.Index)
		}
	}
	return out, nil
}
