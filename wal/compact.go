package wal

// CompactTo removes whole segment files from the front of the log while
// keeping every entry from keepFrom on: it truncates the front to the first
// index of the newest segment that starts at or before keepFrom. It does
// nothing when that segment is already the first, so it never rewrites a
// segment to free less than one. It returns the log's first index afterwards.
//
// The truncation is tidwall's (a START file written atomically, older
// segments removed, the START file renamed), followed by a directory fsync;
// an interrupted one is finished by the next Open.
func (l *Log) CompactTo(keepFrom uint64) (uint64, error) {
	l.mu.RLock()
	cut := l.first.Load()
	for _, start := range l.segs.starts {
		if start <= keepFrom && start > cut {
			cut = start
		}
	}
	l.mu.RUnlock()
	if cut == l.first.Load() {
		return cut, nil
	}
	if err := l.TruncateFront(cut); err != nil {
		return l.first.Load(), err
	}
	return cut, nil
}
