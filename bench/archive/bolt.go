package archive

import (
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The buckets of the bbolt file: records, and the two indexes. Part of the
// archive's format.
var (
	boltRecords  = []byte("records")
	boltWorkflow = []byte("by-workflow")
	boltTime     = []byte("by-time")
)

type boltArchive struct {
	db *bolt.DB
}

// OpenBolt opens (or creates) a bbolt archive, archive.db in dir, with
// bbolt's usual settings: every commit synced, the freelist kept as a map.
func OpenBolt(dir string) (Archive, error) {
	db, err := bolt.Open(filepath.Join(dir, "archive.db"), 0o600, &bolt.Options{
		Timeout:      time.Second,
		FreelistType: bolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("archive: open bbolt: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{boltRecords, boltWorkflow, boltTime} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("archive: bbolt buckets: %w", err)
	}
	return &boltArchive{db: db}, nil
}

func (a *boltArchive) Put(recs []Record) error {
	err := a.db.Update(func(tx *bolt.Tx) error {
		records, byWorkflow, byTime := tx.Bucket(boltRecords), tx.Bucket(boltWorkflow), tx.Bucket(boltTime)
		for i := range recs {
			r := &recs[i]
			val, err := appendValue(nil, r) // bbolt keeps the slices until the commit
			if err != nil {
				return err
			}
			if err := records.Put([]byte(r.ID), val); err != nil {
				return err
			}
			if err := byWorkflow.Put(appendWorkflowKey(nil, r.WorkflowID, r.UpdatedAtNanos, r.ID), []byte{}); err != nil {
				return err
			}
			if err := byTime.Put(appendTimeKey(nil, r.UpdatedAtNanos, r.ID), []byte{}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("archive: bbolt put: %w", err)
	}
	return nil
}

func (a *boltArchive) Get(id string) (r Record, ok bool, err error) {
	err = a.db.View(func(tx *bolt.Tx) error {
		r, ok, err = boltGet(tx.Bucket(boltRecords), id)
		return err
	})
	return r, ok, err
}

func boltGet(records *bolt.Bucket, id string) (Record, bool, error) {
	v := records.Get([]byte(id))
	if v == nil {
		return Record{}, false, nil
	}
	r, err := decodeValue(id, v) // copies out of the mmap before the transaction ends
	return r, err == nil, err
}

func (a *boltArchive) Has(id string) (ok bool, err error) {
	err = a.db.View(func(tx *bolt.Tx) error {
		ok = tx.Bucket(boltRecords).Get([]byte(id)) != nil
		return nil
	})
	return ok, err
}

func (a *boltArchive) List(q Query) (out []Record, err error) {
	lower, upper, prefixBytes := q.bounds()
	index := boltTime
	if q.WorkflowID != "" {
		index = boltWorkflow
	}
	err = a.db.View(func(tx *bolt.Tx) error {
		records := tx.Bucket(boltRecords)
		c := tx.Bucket(index).Cursor()
		for k, _ := c.Seek(lower); k != nil && string(k) < string(upper) && len(out) < q.Limit; k, _ = c.Next() {
			id, err := indexID(k, prefixBytes)
			if err != nil {
				return err
			}
			r, found, err := boltGet(records, id)
			if err == nil && !found {
				err = fmt.Errorf("%w: index entry for %q, which has no record", ErrCorrupt, id)
			}
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

func (a *boltArchive) Settle() error { return nil }

func (a *boltArchive) Busy() bool { return false }

func (a *boltArchive) Close() error { return a.db.Close() }
