package jsonv

// DefaultMaxDepth is the nesting depth allowed when Limits.MaxDepth is zero.
// It is also the default limit of serde_json, a common Rust decoder, so a
// deeper value would not round-trip to every client; and it is shallow
// enough that a hostile value cannot make a recursive reader overflow.
const DefaultMaxDepth = 128

// Limits bounds the work a value may ask of the scanner. The zero value is
// ready to use.
type Limits struct {
	// MaxDepth is the deepest nesting of arrays and objects allowed: "1" is
	// depth 0, "[]" and "{}" are depth 1, "[{}]" is depth 2. Zero or a
	// negative number means DefaultMaxDepth.
	MaxDepth int
}

func (l Limits) maxDepth() int {
	if l.MaxDepth <= 0 {
		return DefaultMaxDepth
	}
	return l.MaxDepth
}

// Validate reports whether b is exactly one JSON value (RFC 8259, with
// optional surrounding whitespace) that decoders read back without loss:
// valid UTF-8 throughout, no lone UTF-16 surrogate escapes, no duplicate
// object keys at any depth, nesting within DefaultMaxDepth. The error, if
// any, is an *Error.
func Validate(b []byte) error { return Limits{}.Validate(b) }

// ValidateObject is Validate plus: the top-level value is an object.
func ValidateObject(b []byte) error { return Limits{}.ValidateObject(b) }

// Canonical appends the canonical form of b to dst and returns the extended
// buffer. b MUST pass Validate; if it does not, dst is returned unchanged
// with Validate's error. dst and b MUST NOT overlap: members are reordered
// in dst while b is still being read. The form is described in the package
// doc.
func Canonical(dst, b []byte) ([]byte, error) { return Limits{}.Canonical(dst, b) }

// Validate is the package-level Validate with these limits.
func (l Limits) Validate(b []byte) error {
	var local localScratch
	s := local.scratch()
	if err := s.validate(b, l.maxDepth()); err != nil {
		return err
	}
	return nil
}

// ValidateObject is the package-level ValidateObject with these limits.
func (l Limits) ValidateObject(b []byte) error {
	var local localScratch
	s := local.scratch()
	if err := s.validateObject(b, l.maxDepth()); err != nil {
		return err
	}
	return nil
}

// Canonical is the package-level Canonical with these limits.
func (l Limits) Canonical(dst, b []byte) ([]byte, error) {
	var local localCanonicalScratch
	s := local.scratch()
	if err := s.validate(b, l.maxDepth()); err != nil {
		return dst, err
	}
	return s.canonical(dst, b), nil
}

// Validator does what the package-level functions do, but keeps its scratch
// buffers between calls, so that even values with large objects or deep
// nesting are checked without allocating once it has warmed up. The zero
// value is ready to use. A Validator MUST NOT be used by two goroutines at
// once.
type Validator struct {
	Limits Limits // the zero value means the defaults
	s      scratch
}

// Validate is the package-level Validate with v's limits and scratch.
func (v *Validator) Validate(b []byte) error {
	err := v.s.validate(b, v.Limits.maxDepth())
	v.s.release()
	if err != nil {
		return err
	}
	return nil
}

// ValidateObject is the package-level ValidateObject with v's limits and
// scratch.
func (v *Validator) ValidateObject(b []byte) error {
	err := v.s.validateObject(b, v.Limits.maxDepth())
	v.s.release()
	if err != nil {
		return err
	}
	return nil
}

// Canonical is the package-level Canonical with v's limits and scratch.
func (v *Validator) Canonical(dst, b []byte) ([]byte, error) {
	defer v.s.release()
	if err := v.s.validate(b, v.Limits.maxDepth()); err != nil {
		return dst, err
	}
	return v.s.canonical(dst, b), nil
}
