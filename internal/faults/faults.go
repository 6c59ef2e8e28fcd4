package faults

// Hooks are called with the path an operation acts on; a non-nil return
// makes that operation fail with it. BeforeWrite precedes a change to a file
// or a directory, BeforeSync an fsync, and AfterSync follows an fsync that
// succeeded (its bytes, or directory entries, are durable by then). What
// each user calls them for is documented where the user exposes them.
type Hooks struct {
	BeforeWrite func(path string) error
	BeforeSync  func(path string) error
	AfterSync   func(path string) error
}

// Write calls BeforeWrite, if any.
func (h *Hooks) Write(path string) error {
	if h == nil || h.BeforeWrite == nil {
		return nil
	}
	return h.BeforeWrite(path)
}

// Sync calls BeforeSync, if any.
func (h *Hooks) Sync(path string) error {
	if h == nil || h.BeforeSync == nil {
		return nil
	}
	return h.BeforeSync(path)
}

// Synced calls AfterSync, if any.
func (h *Hooks) Synced(path string) error {
	if h == nil || h.AfterSync == nil {
		return nil
	}
	return h.AfterSync(path)
}
