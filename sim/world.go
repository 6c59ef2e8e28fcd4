package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/tune"
	"github.com/execstore/execstore/internal/untimed"
	"github.com/execstore/execstore/snapshot"
	"github.com/execstore/execstore/vfs"
	"github.com/execstore/execstore/wal"
)

// clock is the store's injected clock. The simulator sets it; the store reads
// it from its writer and callers' goroutines.
type clock struct{ ns atomic.Int64 }

func (c *clock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) nanos() int64   { return c.ns.Load() }
func (c *clock) set(ns int64)   { c.ns.Store(ns) }

// violation is a broken guarantee: the run stops and reports it.
type violation struct{ msg string }

func (v *violation) Error() string { return v.msg }

func violationf(format string, args ...any) error {
	return &violation{msg: fmt.Sprintf(format, args...)}
}

// world is one seed's run: the store, its directory and clock, the model, the
// durability tracker, and what the run has seen so far.
type world struct {
	cfg  Config
	seed uint64
	rng  *rand.Rand // drives the workload; the storage draws from its own
	// feedRng drives the listings and feed reads (feed.go), so that adding
	// them left the rest of every seed's run as it was.
	feedRng *rand.Rand

	clock   clock
	opts    execstore.Options
	storage *storage
	base    string // this seed's directory
	gen     int    // store directories created so far
	dir     string // the current store directory
	store   *execstore.Store
	// archiveFS holds the current store's archive, in seeds that archive.
	archiveFS *pebblevfs.MemFS
	model     *model
	tr        *trace

	userIDs  []string
	stepKeys []string
	kvKeys   []string
	leases   []execstore.Lease // every lease a claim returned, for stale use
	lastAck  *ackArg           // the latest acknowledgement generated, to repeat
	released *execstore.Lease  // the latest lease a release named, to acknowledge late
	// lastClaim is the latest keyed claim generated, to repeat; claimKeys
	// numbers the request keys.
	lastClaim *op
	claimKeys int
	maxToken  map[string]issuedMax        // the highest token handed out, per execution
	grantedBy map[tokenOf]string          // the request key of the keyed claim that handed a token out
	terminal  map[string]execstore.Record // the first terminal record seen, per execution
	millis    map[int64]bool              // milliseconds used for generated IDs
	storeNow  int64                       // the latest store time seen (Stats.Now)

	ops, crashes int
	checkDue     int      // operations until the next full check
	cov          Coverage // what the run reached
}

// small makes the stores opened with o cut their states into small pieces
// (fsm.Sizes, through internal/tune): chunks of four change-log entries,
// swept once the log holds more entries than records and a chunk's quarter.
// A simulated store, whose state holds dozens of records, then reaches the
// code that compacts them, as a store of millions does. It changes no answer
// and no trace. Every store the simulator opens is small.
func small(o *execstore.Options) {
	tune.SetSizes(o, fsm.Sizes{FeedChunk: 4, FeedSweep: 1})
}

func newWorld(seed uint64, cfg Config, base string) *world {
	w := &world{
		cfg:       cfg,
		seed:      seed,
		rng:       rand.New(rand.NewPCG(seed, 0x5eed)),
		base:      base,
		model:     newModel(simLimits()),
		tr:        newTrace(seed, cfg.Trace),
		maxToken:  map[string]issuedMax{},
		grantedBy: map[tokenOf]string{},
		terminal:  map[string]execstore.Record{},
		millis:    map[int64]bool{},
		cov:       Coverage{},
	}
	w.storage = &storage{rng: rand.New(rand.NewPCG(seed, 0xd15c))}
	w.feedRng = rand.New(rand.NewPCG(seed, 0xfeed))
	w.clock.set(simEpoch.UnixNano())
	segment := []int{512, 1024, 2048, 4096, 16 << 10, 256 << 10}[w.rng.IntN(6)]
	// Generated IDs' random bits are written to the log, and a crash image's
	// stale or garbage tail may repeat them by chance, keeping an entry whole:
	// drawn from the seed, the log and its crash images are the same on every
	// run.
	var idKey [32]byte
	binary.LittleEndian.PutUint64(idKey[:], seed)
	copy(idKey[8:], "sim-ids")
	w.opts = execstore.Options{
		// Its timers never fire: retirement and occurrences are reached at
		// writes only (retire.go, schedules.go).
		Clock:            untimed.Clock(w.clock.Now),
		Limits:           simLimits(),
		SegmentSize:      segment,
		SnapshotEntries:  1 << 40, // snapshots only when the workload asks, so crash points come in a known order
		SnapshotWALBytes: 1 << 40,
		FS:               w.storage.fs(),
		IDRand:           &lockedReader{r: rand.NewChaCha8(idKey)},
		ScheduleGrace:    simScheduleGrace,
		Retention:        retentionOf(seed),
	}
	small(&w.opts)
	w.model.retention = w.opts.Retention
	if w.opts.Retention > 0 && archiveOf(seed) {
		w.opts.Archive = true
		w.model.archive = true
		w.opts.ForgetAfter = forgetOf(seed, w.opts.Retention)
		w.model.forgetAfter = w.opts.ForgetAfter
	}
	for i := range 6 + w.rng.IntN(30) {
		w.userIDs = append(w.userIDs, fmt.Sprintf("x-%02d", i))
	}
	w.stepKeys = []string{"s1", "s2", "s3", "c1", "c2"}
	w.kvKeys = []string{"k1", "k2", "k3", "k4", "k5", strings.Repeat("k", simKeyBytes)} // the last exactly at the key size limit
	w.tr.line("segment size %d, %d user IDs, retention %v", segment, len(w.userIDs), w.opts.Retention)
	return w
}

// run drives the seed: the workload with its crashes and faults, then the
// liveness phase, then a clean close.
func (w *world) run() error {
	if err := w.openFresh(); err != nil {
		return err
	}
	defer w.abandon()
	for w.ops < w.cfg.Ops {
		w.ops++
		if err := w.step(); err != nil {
			return w.fail(err)
		}
	}
	if err := w.liveness(); err != nil {
		return w.fail(err)
	}
	if err := w.cleanRestart(); err != nil {
		return w.fail(err)
	}
	return nil
}

// fail adds the run's position to an error.
func (w *world) fail(err error) error {
	return fmt.Errorf("operation %d: %w", w.ops, err)
}

// ---- The store's lifecycle ---------------------------------------------------

func (w *world) newDir() string {
	w.gen++
	return filepath.Join(w.base, fmt.Sprintf("s%03d", w.gen))
}

// useArchive gives the store about to open in w.dir its archive's
// filesystem: fs, whose archive is in from/archive, or a new one if fs is
// nil; nothing unless the seed archives.
func (w *world) useArchive(fs *pebblevfs.MemFS, from string) error {
	if !w.opts.Archive {
		return nil
	}
	if fs == nil {
		fs = pebblevfs.NewCrashableMem()
	}
	if err := archiveAt(fs, from, w.dir); err != nil {
		return err
	}
	w.archiveFS = fs
	tune.SetArchiveFS(&w.opts, fs)
	w.storage.setArchive(fs)
	return nil
}

// archiveAt moves an archive filesystem's store directory from from to dir
// (the directories a crash image is written to are new), and makes every
// directory on the way durable, as the store's directory is on disk.
func archiveAt(fs *pebblevfs.MemFS, from, dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := fs.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if from != "" && from != dir {
		if err := fs.Rename(filepath.Join(from, "archive"), filepath.Join(dir, "archive")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	for d := dir; ; d = filepath.Dir(d) {
		f, err := fs.OpenDir(d)
		if err != nil {
			return err
		}
		err = errors.Join(f.Sync(), f.Close())
		if err != nil || d == filepath.Dir(d) {
			return err
		}
	}
}

func (w *world) openFresh() error {
	w.dir = w.newDir()
	if err := os.MkdirAll(w.dir, 0o750); err != nil {
		return err
	}
	d, err := newDisk(w.dir, w.cfg.StrictDirs)
	if err != nil {
		return err
	}
	w.storage.setDisk(d)
	if err := w.useArchive(nil, ""); err != nil {
		return err
	}
	s, err := execstore.Open(w.dir, w.opts)
	if err != nil {
		return violationf("a new store does not open: %v", err)
	}
	w.store = s
	return w.afterOpen()
}

// abandon closes the current store, if any, and removes its directory. After
// a crash the store's answers no longer matter: closing it only releases its
// goroutine and files.
func (w *world) abandon() {
	if w.store != nil {
		w.store.Close()
		w.store = nil
	}
	if w.dir != "" {
		os.RemoveAll(w.dir)
		w.dir = ""
	}
}

// barrier waits until the writer has finished everything queued before it: a
// command that changes nothing still passes through the writer.
func (w *world) barrier() {
	_, err := w.store.RequestWake(context.Background(), "sim-barrier", w.clock.Now())
	if execstore.ErrorCode(err) == codeNotFound {
		w.model.stamp(w.clock.nanos())
	}
}

// crashTo abandons the current store as a crash would (its directory is gone
// with the machine; the image is what the disk kept) and recovers from the
// image, crashing again during recovery at random.
func (w *world) crashTo(im *crashImage, why string) error {
	w.abandon()
	w.crashes++
	w.tr.line("crash (%s): %s", why, im.describe())
	for attempt := 0; ; attempt++ {
		w.dir = w.newDir()
		if err := im.write(w.dir); err != nil {
			return err
		}
		d, err := newDisk(w.dir, w.cfg.StrictDirs)
		if err != nil {
			return err
		}
		w.storage.setDisk(d)
		if err := w.useArchive(cloneArchive(im.archive), im.archiveRoot); err != nil {
			return err
		}
		var p *plan
		if attempt < 2 && w.rng.IntN(3) == 0 {
			p = &plan{at: 1 + w.rng.IntN(recoveryEvents), crash: true}
			w.storage.arm(p)
		}
		s, err := execstore.Open(w.dir, w.opts)
		w.storage.disarm()
		if p != nil && p.fired != nil {
			if err == nil {
				s.Close()
				return violationf("recovery went on after a storage error at %s", p.fired)
			}
			if p.err != nil {
				return p.err
			}
			w.crashes++
			w.coverPoint("crash", "in-recovery", p.fired)
			im = p.image
			w.tr.line("crash during recovery at %s: %s", p.fired, im.describe())
			os.RemoveAll(w.dir)
			continue
		}
		if err != nil {
			return violationf("the store does not open after a crash: %v", err)
		}
		w.store = s
		return nil
	}
}

func (im *crashImage) describe() string {
	if len(im.desc) == 0 {
		return "everything durable"
	}
	s := im.desc[0]
	for _, d := range im.desc[1:] {
		s += "; " + d
	}
	return s
}

// recoveryEvents bounds the crash point a crash during recovery picks: the
// parent directory's fsync, the rewrite of the last segment (before the
// write, around its fsync and the directory's) and the directory's fsync at
// the end are 9 events; a torn-tail repair adds more before the rewrite.
const recoveryEvents = 9

// cleanRestart closes the store cleanly and reopens the same directory.
func (w *world) cleanRestart() error {
	w.barrier()
	if err := w.store.Close(); err != nil {
		return violationf("Close: %v", err)
	}
	w.store = nil
	if err := w.storage.disk.closed(); err != nil {
		return err
	}
	w.tr.line("close and reopen")
	s, err := execstore.Open(w.dir, w.opts)
	if err != nil {
		return violationf("the store does not reopen after a clean close: %v", err)
	}
	w.store = s
	if err := w.afterOpen(); err != nil {
		return err
	}
	return w.checkFull(w.store, "after a clean restart")
}

// afterOpen checks what must hold after any open: the invariants, and a
// store time no earlier than any seen before or recorded in a record. Then
// the model continues from the store's time.
func (w *world) afterOpen() error {
	if err := w.store.CheckInvariants(); err != nil {
		return violationf("after recovery: %v", err)
	}
	st, err := w.store.Stats(context.Background())
	if err != nil {
		return err
	}
	now := st.Now.UnixNano()
	if st.Now.IsZero() {
		now = 0
	}
	switch {
	case now < w.storeNow:
		return violationf("store time went backwards across a restart: %s, had %s", simTime(st.Now), simTime(timeOf(w.storeNow)))
	case now < w.model.maxUpdated():
		return violationf("store time %s is earlier than a record's update at %s", simTime(st.Now), simTime(timeOf(w.model.maxUpdated())))
	case now > w.model.last:
		return violationf("store time %s is later than any time it stamped (%s)", simTime(st.Now), simTime(timeOf(w.model.last)))
	}
	w.storeNow = now
	w.model.last = now
	if err := w.checkIndexes(st); err != nil {
		return err
	}
	if err := w.fallbackChecked(); err != nil {
		return err
	}
	return w.checkCompaction()
}

// fallbackChecked waits for the store's background check of its fallback
// path after an open, and requires it to find nothing: crash images lose
// only what was not durable, and the fallback path (the older snapshot, the
// log between the two) was. Waiting also keeps the snapshot it would take
// on damage from running in the background of the next operations, where
// its crash points would come at times the seed does not fix. The bound only keeps
// a wrong store from hanging the run.
func (w *world) fallbackChecked() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := w.store.Stats(context.Background())
		if err != nil {
			return err
		}
		if st.FallbackChecked {
			if st.FallbackErr != nil {
				return violationf("after an open: %v", st.FallbackErr)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return violationf("the check of the fallback path did not finish within 30s of an open")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// ---- Crashes and faults during an operation --------------------------------

// pending is an operation the store did not acknowledge before a crash or a
// storage error: after recovery it must be whole or absent, and the
// unacknowledged operations of one batch survive as a prefix.
type pending struct {
	op    *op
	clock int64
}

// runArmed runs o with a plan armed and, when the plan fires, settles what
// the store acknowledged, recovers, and checks that each unacknowledged
// operation is whole or absent.
func (w *world) runArmed(o *op, p *plan) (fired bool, err error) {
	// The clock is set for the operation before the barrier, which reaches
	// the schedules' occurrences due at it: the operation's own write is
	// then the only one the plan can act in.
	w.prepare(o)
	w.barrier()
	st, err := w.store.Stats(context.Background())
	if err != nil {
		return false, err
	}
	before := st.WALLastIndex
	m0 := w.model.clone()
	clock := w.clock.nanos()
	w.storage.arm(p)
	got := o.call(w.store)
	w.barrier()
	w.storage.disarm()
	if p.fired == nil {
		return false, w.settle(o, clock, got, nil) // only do judges a promise to write nothing
	}
	if p.err != nil {
		return true, p.err
	}
	what := "crash"
	if !p.crash {
		what = "storage error"
	}
	w.coverPoint(map[bool]string{true: "crash", false: "fault"}[p.crash], "in-op", p.fired)
	w.tr.line("%d %s -> %s (%s at %s)", w.ops, o.describe(w.tr), got.describe(w.tr), what, p.fired)
	w.model = m0
	unacked, err := w.acknowledged(o, clock, got)
	if err != nil {
		return true, err
	}
	if p.crash {
		if err := w.crashTo(p.image, fmt.Sprintf("during %s at %s", o.kind, p.fired)); err != nil {
			return true, err
		}
	} else if err := w.failStopped(unacked); err != nil {
		return true, err
	}
	return true, w.reconcile(before, unacked)
}

// acknowledged applies to the model the parts of o the store answered despite
// the crash or fault (commands that changed nothing are answered without
// being logged), and returns the unacknowledged parts.
func (w *world) acknowledged(o *op, clock int64, got result) ([]pending, error) {
	if o.kind != opAckBatch {
		if got.Code == codeStorage {
			return []pending{{o, clock}}, nil
		}
		return nil, w.compare(o, clock, got)
	}
	if got.Batch == nil {
		if got.Code == codeStorage {
			return nil, nil // refused before queueing: nothing was written
		}
		return nil, violationf("%s: %s", o.kind, got.Code)
	}
	var unacked []pending
	for i, a := range o.acks {
		one := &op{kind: opAck, lease: a.lease, out: a.out}
		if got.Batch[i].Code == codeStorage {
			unacked = append(unacked, pending{one, clock})
			continue
		}
		if err := w.compare(one, clock, got.Batch[i]); err != nil {
			return nil, err
		}
	}
	return unacked, nil
}

// failStopped checks the fail-stop state after an injected storage error:
// writes are refused, the applied state is the model's (nothing
// unacknowledged was applied), and the store reopens.
func (w *world) failStopped(unacked []pending) error {
	err := w.store.Commit(context.Background(), execstore.Write{Key: "k1", Value: []byte(`"after a storage error"`)})
	if execstore.ErrorCode(err) != codeStorage {
		return violationf("a write after a storage error returned %v, want %s", err, codeStorage)
	}
	if err := w.checkFull(w.store, "in the fail-stop state"); err != nil {
		return err
	}
	if err := w.store.Close(); err != nil {
		return violationf("Close after a storage error: %v", err)
	}
	w.store = nil
	if err := w.storage.disk.closed(); err != nil {
		return err
	}
	w.tr.line("reopen after a storage error (%d unacknowledged)", len(unacked))
	// The reopen rewrites the last segment, whose unsynced bytes the failed
	// fsync may have left in the page cache only: crash in the middle of it
	// now and then.
	var p *plan
	if w.rng.IntN(3) == 0 {
		p = &plan{at: 1 + w.rng.IntN(recoveryEvents), crash: true}
		w.storage.arm(p)
	}
	s, err := execstore.Open(w.dir, w.opts)
	w.storage.disarm()
	if p != nil && p.fired != nil {
		if err == nil {
			s.Close()
			return violationf("the reopen went on after a crash at %s", p.fired)
		}
		if p.err != nil {
			return p.err
		}
		w.coverPoint("crash", "in-reopen", p.fired)
		return w.crashTo(p.image, "reopening after a storage error, at "+p.fired.String())
	}
	if err != nil {
		return violationf("the store does not reopen after a storage error: %v", err)
	}
	w.store = s
	return nil
}

// reconcile rewinds the model to what recovery kept: the log's growth since
// before the operation says how many unacknowledged commands survived, and
// the state must then be exactly the model's.
func (w *world) reconcile(before uint64, unacked []pending) error {
	st, err := w.store.Stats(context.Background())
	if err != nil {
		return err
	}
	entries := int(st.WALLastIndex) - int(before)
	if entries < 0 {
		return violationf("acknowledged commands lost: the log ends at entry %d after recovery, entries up to %d were acknowledged",
			st.WALLastIndex, before)
	}
	// One entry may hold several unacknowledged operations (an
	// acknowledge-batch command): count the commands the kept entries hold.
	var ids []string
	if entries > 0 {
		if ids, err = w.loggedIDs(before+1, st.WALLastIndex); err != nil {
			return err
		}
	}
	kept := len(ids)
	if kept > len(unacked) {
		return violationf("phantom commands: the log ends at entry %d after recovery, %d entries were acknowledged and %d more operations written unacknowledged",
			st.WALLastIndex, before, len(unacked))
	}
	for i, p := range unacked[:kept] {
		w.model.touched = nil
		p.op.apply(w.model, p.clock, ids[i])
	}
	w.tr.line("recovered: %d of %d unacknowledged commands kept", kept, len(unacked))
	if err := w.afterOpen(); err != nil {
		return err
	}
	if err := w.checkFull(w.store, "after recovery"); err != nil {
		return err
	}
	return w.replayTwice()
}

// loggedIDs reads log entries [from, to] of the recovered store from a copy of
// its directory and returns, per operation they hold (an acknowledge-batch
// entry holds one per acknowledgement), the execution ID it generated (an
// admission without an ID, a child start), or "".
func (w *world) loggedIDs(from, to uint64) ([]string, error) {
	tmp := filepath.Join(w.base, "ids")
	defer os.RemoveAll(tmp)
	if err := copyStore(w.dir, tmp); err != nil {
		return nil, err
	}
	l, err := wal.Open(filepath.Join(tmp, "wal"), wal.Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	var ids []string
	for i := from; i <= to; i++ {
		payload, err := l.Read(i)
		if err != nil {
			return nil, err
		}
		var c fsm.Command
		if err := fsm.DecodeInto(&c, payload); err != nil {
			return nil, err
		}
		switch {
		case c.Kind == fsm.KindAdmit && c.Generated:
			ids = append(ids, c.ExecutionID)
		case c.Kind == fsm.KindStart:
			ids = append(ids, c.ChildID)
		case c.Kind == fsm.KindAcknowledgeBatch:
			for range c.Acks {
				ids = append(ids, "")
			}
		default:
			ids = append(ids, "")
		}
	}
	return ids, nil
}

// replayTwice opens a copy of the recovered directory as a second store: the
// same log replayed again must give the same state.
func (w *world) replayTwice() error {
	tmp := filepath.Join(w.base, "replay")
	defer os.RemoveAll(tmp)
	if err := copyStore(w.dir, tmp); err != nil {
		return err
	}
	opts := w.opts
	opts.FS = nil
	if w.opts.Archive {
		fs := cloneArchive(w.archiveFS)
		if err := archiveAt(fs, w.storage.root(), tmp); err != nil {
			return err
		}
		tune.SetArchiveFS(&opts, fs)
	}
	s, err := execstore.Open(tmp, opts)
	if err != nil {
		return violationf("a second replay of the recovered log does not open: %v", err)
	}
	defer s.Close()
	if err := w.checkFull(s, "on a second replay of the recovered log"); err != nil {
		return err
	}
	a, err := w.store.Stats(context.Background())
	if err != nil {
		return err
	}
	b, err := s.Stats(context.Background())
	if err != nil {
		return err
	}
	if !a.Now.Equal(b.Now) || a.WALLastIndex != b.WALLastIndex {
		return violationf("a second replay differs: time %s and last index %d, first replay %s and %d",
			simTime(b.Now), b.WALLastIndex, simTime(a.Now), a.WALLastIndex)
	}
	return nil
}

// ---- Whole-store crashes -----------------------------------------------------

// crashNow crashes while the store is idle.
func (w *world) crashNow(why string) error {
	w.cover("crash", "idle", "idle")
	w.barrier()
	last := w.lastIndex()
	im, err := w.storage.quiescentImage()
	if err != nil {
		return err
	}
	if err := w.crashTo(im, why); err != nil {
		return err
	}
	return w.reconcile(last, nil)
}

func (w *world) lastIndex() uint64 {
	st, err := w.store.Stats(context.Background())
	if err != nil {
		return 0
	}
	return st.WALLastIndex
}

// snapshotCrash takes a snapshot and crashes in the middle of it: at a crash
// point of the snapshot package (creating, syncing, renaming, pruning,
// syncing the directory) or of the log's compaction. Past every one, it
// crashes idle after the snapshot.
func (w *world) snapshotCrash() error {
	w.barrier()
	last := w.lastIndex()
	p := &plan{at: 1 + w.rng.IntN(snapshotEvents(w.dir)), crash: true}
	w.storage.arm(p)
	err := w.store.Snapshot(context.Background())
	w.storage.disarm()
	if p.fired == nil {
		if err != nil {
			return violationf("Snapshot: %v", err)
		}
		if err := w.afterSnapshot(); err != nil {
			return err
		}
		return w.crashNow("idle, after a snapshot")
	}
	if p.err != nil {
		return p.err
	}
	if err == nil {
		return violationf("Snapshot returned nil after a crash at %s", p.fired)
	}
	w.coverPoint("crash", "in-snapshot", p.fired)
	if err := w.crashTo(p.image, "during a snapshot at "+p.fired.String()); err != nil {
		return err
	}
	return w.reconcile(last, nil)
}

// snapshotEvents bounds the crash point a crash or fault in a snapshot picks:
// the snapshot package's (the store directory's fsync around, the temporary
// file's creation and fsync, the rename, the directory's fsync: 8), then
// pruning (a removal each, the directory's fsync), then the log's compaction.
func snapshotEvents(dir string) int {
	names, _ := listFiles(filepath.Join(dir, "snapshots"))
	prune := max(0, len(names)-1)
	if prune > 0 {
		prune += 2
	}
	return 8 + prune + compactionEvents(dir)
}

// compactionEvents bounds the crash points of the log's compaction after a
// snapshot. The snapshot about to be taken keeps the newest one there is, so
// the log is compacted to the segment holding the entry after it: three
// events per segment file removed (before the removal, around the directory's
// fsync). One segment's worth more lets a crash fall past the compaction now
// and then.
func compactionEvents(dir string) int {
	keep := uint64(0)
	snaps, _ := listFiles(filepath.Join(dir, "snapshots"))
	for _, name := range snaps {
		if v, ok := strings.CutPrefix(name, "snapshot-"); ok && strings.HasSuffix(v, ".snap") {
			if index, err := strconv.ParseUint(strings.TrimSuffix(v, ".snap"), 10, 64); err == nil {
				keep = max(keep, index+1)
			}
		}
	}
	names, _ := listFiles(filepath.Join(dir, "wal"))
	var starts []uint64
	for _, name := range names {
		if start, ok := segmentIndex(name); ok {
			starts = append(starts, start)
		}
	}
	cut := uint64(0)
	for _, start := range starts {
		if start <= keep {
			cut = max(cut, start)
		}
	}
	removed := 0
	for _, start := range starts {
		if start < cut {
			removed++
		}
	}
	return 3 * (removed + 1)
}

// snapshotFault injects a storage error into a snapshot: in the snapshot
// package the snapshot must fail and the store go on (or fail-stop), losing
// nothing; in the log's compaction the store must fail-stop, and reopening
// must lose nothing.
func (w *world) snapshotFault() error {
	w.barrier()
	last := w.lastIndex()
	p := &plan{at: 1 + w.rng.IntN(snapshotEvents(w.dir))}
	w.storage.arm(p)
	err := w.store.Snapshot(context.Background())
	w.storage.disarm()
	if p.err != nil {
		return p.err
	}
	switch {
	case p.fired == nil && err != nil:
		return violationf("Snapshot: %v", err)
	case p.fired == nil:
		w.tr.line("%d snapshot", w.ops)
		return w.afterSnapshot()
	case err == nil:
		return violationf("Snapshot returned nil after a storage error at %s", p.fired)
	}
	w.tr.line("%d snapshot -> %s (storage error at %s)", w.ops, codeOf(err), p.fired)
	w.coverPoint("fault", "in-snapshot", p.fired)
	st, serr := w.store.Stats(context.Background())
	if serr != nil {
		return serr
	}
	if st.Failed == nil {
		if !p.fired.snapshot() {
			return violationf("the store went on after a storage error in its log's compaction at %s", p.fired)
		}
		// Survived: nothing changed, and the store still writes.
		if err := w.checkFull(w.store, "after a failed snapshot"); err != nil {
			return err
		}
		return w.checkCompaction()
	}
	if err := w.failStopped(nil); err != nil {
		return err
	}
	return w.reconcile(last, nil)
}

// afterSnapshot checks what a snapshot that succeeded leaves: it covers every
// applied entry, and the log was not cut behind a snapshot a crash may lose.
func (w *world) afterSnapshot() error {
	st, err := w.store.Stats(context.Background())
	if err != nil {
		return err
	}
	if st.SnapshotIndex != st.AppliedIndex {
		return violationf("a snapshot taken with entries up to %d applied covers up to %d", st.AppliedIndex, st.SnapshotIndex)
	}
	return w.checkCompaction()
}

// checkCompaction checks that the log was never truncated behind a snapshot
// whose name or contents are not durable: once the log no longer starts at
// its first entry, two snapshots that every crash keeps whole (the newest and
// its fallback) must continue it.
func (w *world) checkCompaction() error {
	st, err := w.store.Stats(context.Background())
	if err != nil {
		return err
	}
	if st.WALFirstIndex <= 1 {
		return nil
	}
	kept, err := w.storage.durableSnapshots()
	if err != nil {
		return err
	}
	n := 0
	for _, index := range kept {
		if index+1 >= st.WALFirstIndex {
			n++
		}
	}
	if n < 2 {
		return violationf("the log starts at entry %d, and only %d snapshot(s) that every crash keeps continue it (durable: %v)",
			st.WALFirstIndex, n, kept)
	}
	return nil
}

// checkIndexes checks, after an open, every index the store keeps about its
// log against the files: everything logged is applied, and the snapshot it
// loaded is the newest whole one the log continues.
func (w *world) checkIndexes(st execstore.Stats) error {
	if st.AppliedIndex != st.WALLastIndex {
		return violationf("after an open, entries up to %d are applied and the log ends at %d", st.AppliedIndex, st.WALLastIndex)
	}
	infos, err := snapshot.List(vfs.Default, filepath.Join(w.dir, "snapshots"))
	if err != nil {
		return err
	}
	want := uint64(0)
	for _, info := range infos {
		if h, err := snapshot.Verify(vfs.Default, info.Path); err == nil && h.Index+1 >= st.WALFirstIndex && h.Index <= st.WALLastIndex {
			want = h.Index
			break
		}
	}
	if st.SnapshotIndex != want {
		return violationf("after an open, the store says its snapshot covers up to entry %d; the newest whole one the log continues covers up to %d",
			st.SnapshotIndex, want)
	}
	if want == 0 && st.WALFirstIndex > 1 {
		return violationf("the store opened with no snapshot and a log that starts at entry %d", st.WALFirstIndex)
	}
	return nil
}

func codeOf(err error) string {
	if c := execstore.ErrorCode(err); c != "" {
		return c
	}
	return "error"
}

// ---- Liveness ----------------------------------------------------------------

// liveness stops every fault and delivers what is pending: each round moves
// the clock to the next claimable time, claims everything due and completes
// it (a child's completion wakes its parent for a later round). Every pending
// wake must be delivered within the bound.
func (w *world) liveness() error {
	w.tr.line("liveness")
	if err := w.deleteQueues(); err != nil { // queue_settings.go
		return err
	}
	if err := w.deleteSchedules(); err != nil {
		return err
	}
	bound := 3 + len(w.model.order)
	for round := 0; ; round++ {
		at, ok := w.model.nextClaimable()
		if !ok {
			break
		}
		if round == bound {
			return violationf("liveness: executions still pending after %d rounds (next at %s)", bound, simTime(timeOf(at)))
		}
		w.clock.set(max(w.clock.nanos(), at))
		claim := &op{kind: opClaim, limit: simClaimLimit, dur: time.Second}
		got, err := w.do(claim)
		if err != nil {
			return err
		}
		for _, l := range got.Leases {
			if _, err := w.do(&op{kind: opAck, lease: l, out: outcomeCatalog[2]}); err != nil {
				return err
			}
		}
	}
	st, err := w.store.Stats(context.Background())
	if err != nil {
		return err
	}
	if st.Pending != 0 || !st.NextDue.IsZero() {
		return violationf("liveness: the store still has %d pending executions (next due %s)", st.Pending, simTime(st.NextDue))
	}
	return w.checkFull(w.store, "after the liveness phase")
}

// lockedReader makes a reader safe for the concurrent calls a store may make.
type lockedReader struct {
	mu sync.Mutex
	r  io.Reader
}

func (l *lockedReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Read(p)
}
