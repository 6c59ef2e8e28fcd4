// Package jsonv checks that a JSON value will survive a decoder unchanged,
// and computes the canonical form the store compares params by.
//
// # Why it exists
//
// The store keeps JSON values byte for byte: params, results, step values
// and key-value values. Clients read them back with whatever decoder their
// language has, and most decoders accept more than they can give back:
//
//   - a duplicate object key is kept once (usually the last one wins), so a
//     member silently disappears;
//   - invalid UTF-8 and a lone UTF-16 surrogate escape such as "\ud800" are
//     silently replaced by U+FFFD;
//   - deeply nested input exhausts a recursive decoder's stack.
//
// A value that cannot round-trip is refused at admission, with an *Error
// that says what is wrong and at which byte offset, instead of being stored
// and later corrupted in a client. The rules Validate enforces are:
//
//   - b is exactly one RFC 8259 JSON value; whitespace (space, tab, line
//     feed, carriage return) may surround it, nothing else may;
//   - every string is valid UTF-8 (no overlong forms, no UTF-8-encoded
//     surrogates), and every \u escape of a surrogate is a high half
//     immediately followed by a low half;
//   - no object, at any depth, has two keys that are equal after
//     unescaping: "a" and "\u0061" are duplicates;
//   - arrays and objects nest at most Limits.MaxDepth deep
//     (DefaultMaxDepth, 128, unless set).
//
// Numbers are checked against the grammar but not against any range: the
// store keeps them as text, so 1e400 and 12345678901234567890 are valid.
// Whether a reader can hold them in a float64 is the reader's concern.
// "\u0000" is valid: common decoders turn it into a NUL and back. Values of
// 4 GiB or more are refused outright, since the scan keeps 32-bit offsets.
//
// # How Validate works
//
// Validate is on the admission hot path, so it is a single left-to-right
// pass with no recursion and, for typical values, no allocation:
//
//   - Open arrays and objects live on an explicit stack of frames, so the
//     Go stack does not grow with the input; MaxDepth bounds the frames.
//   - Strings are scanned eight bytes at a time: one word test finds the
//     next quote, backslash, control byte or non-ASCII byte, and only
//     those take the slower path that checks escapes and decodes UTF-8.
//   - Each object's keys are pushed onto a key stack as references, not
//     copies: a key without a backslash is its own unescaped form, so it is
//     a span of the input. Only a key with escapes is decoded, into an arena
//     that is popped with the object.
//   - While an object has at most 16 keys, each new key is compared with
//     the earlier ones, which for a handful of keys is cheaper than any
//     set. Past 16, the check waits until the object closes, then sorts
//     the keys' hashes (packed with their indexes into integers) and
//     compares only keys whose hashes match. The hash is fixed, so a value
//     built to make hashes collide sends its object to a plain sort of the
//     keys' bytes: never worse than O(n log n) comparisons.
//   - The package-level functions start with scratch space on their own
//     stack frame; only a value that outgrows it (many keys open at once,
//     long escaped keys, deep nesting) makes the scratch move to the heap.
//     A Validator keeps its scratch between calls instead.
//
// When a value has several problems, the one reported is deterministic: the
// first met in the scan, except that a duplicate key in an object of more
// than 16 keys is met when that object closes, and that ValidateObject
// looks at the kind of the top-level value before anything else.
//
// # The canonical form
//
// Canonical spells a valid value one fixed way, so that two values that
// differ only in insignificant whitespace, member order or string escaping
// produce the same bytes. The store hashes the canonical form of a child
// start's params to decide whether a repeated start is the same request.
//
//   - No insignificant whitespace.
//   - Object members are sorted by their unescaped key bytes in plain byte
//     order, which for UTF-8 is code point order. (RFC 8785 sorts by UTF-16
//     code units instead; the two differ only for keys that mix characters
//     above U+FFFF with characters from U+E000 to U+FFFF.)
//   - Strings are re-escaped: only '"', '\\' and control characters below
//     U+0020 are escaped, as \b \f \n \r \t where JSON has a short escape
//     and as \u00xx (lower-case hex) otherwise; everything else is raw
//     UTF-8. So "\u00e9" and "é" are the same, and "\/" becomes "/".
//   - Numbers are kept as written: 1, 1.0, 1e0 and 10e-1 stay different.
//     Normalizing them would mean choosing a precision, and keeping the
//     text errs in the safe direction for an idempotency check: a retry
//     that spells a number differently is reported as a mismatch, loudly,
//     rather than two different requests being taken for one.
//   - true, false and null are kept as they are.
//
// Canonical validates first, then makes a second pass that trusts the
// input. Each object's members are written in input order while their
// spans are recorded; when the object closes, the spans are sorted by key
// and, unless they were already in order, the object's body is rewritten in
// place. Inner objects are finished before their parent sorts, so each
// level moves its members' final text as opaque bytes. The canonical form
// of a valid value is itself valid, and is its own canonical form.
//
// The package is pure: it uses no I/O, clock, randomness or shared state,
// so the state machine may call it and replay the result.
package jsonv
