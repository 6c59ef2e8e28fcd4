package execstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/snapshot"
	"github.com/execstore/execstore/wal"
)

// The fallback path is checked, not assumed.
//
// Recovery reads the newest snapshot and the log after it; the older kept
// snapshot and the log between the two are there only for the day the newest
// snapshot is lost, and nothing reads them until then. A damaged byte there
// would stay hidden until the one moment it matters. So after Open a
// background check reads every byte of that path: the older snapshot's
// checksum and every WAL entry between the two snapshots (frame checksum and
// command decoding). What it finds is reported by Stats (FallbackChecked,
// FallbackErr) and logged; on damage the store also takes a snapshot at once,
// after which the damaged part is no longer needed (the snapshot it loaded
// becomes the older kept one, and the log before it is compacted away).

// fallback is what recovery would use if the snapshot it loaded were lost:
// a snapshot (none: the log from its first entry) and the entries from..to
// after it, up to the loaded snapshot's index. The zero value is no
// fallback at all.
type fallback struct {
	snapshot *snapshot.Info
	from, to uint64
}

// fallbackOf returns the fallback of a snapshot at index loaded: the newest
// of the older snapshots the log continues, else the log from its start if
// it still has it. older is newest first.
func fallbackOf(older []snapshot.Info, loaded, walFirst uint64) fallback {
	for i := range older {
		if older[i].Index < loaded && older[i].Index+1 >= walFirst {
			return fallback{snapshot: &older[i], from: older[i].Index + 1, to: loaded}
		}
	}
	if walFirst == 1 {
		return fallback{from: 1, to: loaded}
	}
	return fallback{} // none: the loaded snapshot is the only way back
}

// fallbackCheck runs the check of the fallback once, in the background.
type fallbackCheck struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	checked atomic.Bool
	err     atomic.Pointer[error]
}

func (c *fallbackCheck) start(lc *logCommitter) {
	s := lc.s
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		err := lc.checkFallback(ctx, lc.fallback)
		if ctx.Err() != nil {
			return // the store closed first
		}
		if err != nil {
			err = fmt.Errorf("execstore: the fallback recovery path is damaged: %w", err)
			c.err.Store(&err)
			s.logger.Error("execstore: the older snapshot or the log between it and the newest is damaged; "+
				"recovery could not fall back on it if the newest snapshot were lost. Taking a snapshot so that it is no longer needed",
				"err", err)
			go func() {
				if err := s.Snapshot(ctx); err != nil && !errors.Is(err, ErrClosed) && ctx.Err() == nil {
					s.logger.Error("execstore: snapshot after a damaged fallback failed", "err", err)
				}
			}()
		}
		c.checked.Store(true)
	}()
}

// stop ends the check and waits for it. Close calls it.
func (c *fallbackCheck) stop() {
	if c.cancel != nil {
		c.cancel()
		c.wg.Wait()
	}
}

// result returns whether the check finished and what it found.
func (c *fallbackCheck) result() (bool, error) {
	if p := c.err.Load(); p != nil {
		return true, *p
	}
	return c.checked.Load(), nil
}

// checkFallback reads every byte of the fallback path. Entries compacted away
// meanwhile are no longer needed, so running out of the log ends the check
// without an error.
func (c *logCommitter) checkFallback(ctx context.Context, fb fallback) error {
	if fb.snapshot != nil {
		if _, err := snapshot.Verify(c.s.opts.FS, fb.snapshot.Path); err != nil {
			return err
		}
	}
	var cmd fsm.Command
	for index := max(fb.from, 1); index <= fb.to; index++ {
		if ctx.Err() != nil {
			return nil
		}
		payload, err := c.wal.Read(index)
		switch {
		case errors.Is(err, wal.ErrOutOfRange), errors.Is(err, wal.ErrClosed):
			return nil
		case err != nil:
			return err
		}
		if err := fsm.DecodeInto(&cmd, payload); err != nil {
			return fmt.Errorf("entry %d: %w", index, err)
		}
	}
	return nil
}
