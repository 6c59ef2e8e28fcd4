package replica

import (
	"encoding/binary"
	"fmt"

	"github.com/execstore/execstore/fsm"
)

// A raft log's data is one command in fsm's codec, or an envelope of several: the
// replicated store's writer proposes a batch of commands as one log, so that raft's work
// per log (its bookkeeping, a future, a wal entry, a place in an append) is paid once per
// batch, as the single-node store pays one wal batch per batch. Part of the log format:
//
//	+------------------+-------------+------------------------------------------+
//	| envelopeMagic 1B | count uv ≥2 | count × ( length uv ≥1 | command bytes ) |
//	+------------------+-------------+------------------------------------------+
//
// fsm's codec versions are small numbers (CodecVersion), so the first byte tells the two
// apart. The framing is checked whole before anything is applied: an envelope whose
// framing is bad (a count or length past the data, bytes left over, varints not minimal)
// applies nothing. Inside a well-framed envelope each command is its own: one that does not
// decode gets a *CommandError as its outcome, the others apply, in order.
const envelopeMagic byte = 0xE5

// MaxEnvelopeCommands and MaxEnvelopeBytes bound an envelope: Propose starts a new one when
// either would be passed.
const (
	MaxEnvelopeCommands = 4096
	MaxEnvelopeBytes    = 4 << 20
)

// appendEnvelope appends the envelope of cmds (at least two) to dst.
func appendEnvelope(dst []byte, cmds [][]byte) []byte {
	dst = append(dst, envelopeMagic)
	dst = binary.AppendUvarint(dst, uint64(len(cmds)))
	for _, c := range cmds {
		dst = binary.AppendUvarint(dst, uint64(len(c)))
		dst = append(dst, c...)
	}
	return dst
}

// envelopeLen is the encoded length of an envelope of cmds.
func envelopeLen(cmds [][]byte) int {
	n := 1 + uvarintLen(uint64(len(cmds)))
	for _, c := range cmds {
		n += uvarintLen(uint64(len(c))) + len(c)
	}
	return n
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// isEnvelope reports whether a command log's data is an envelope.
func isEnvelope(data []byte) bool { return len(data) > 0 && data[0] == envelopeMagic }

// splitEnvelope returns the commands' bytes of an envelope (sub-slices of data), or an
// error wrapping fsm.ErrDecode when its framing is bad.
func splitEnvelope(data []byte) ([][]byte, error) {
	bad := func(what string) ([][]byte, error) {
		return nil, fmt.Errorf("%w: envelope: %s", fsm.ErrDecode, what)
	}
	b := data[1:]
	count, n := binary.Uvarint(b)
	if n <= 0 || n != uvarintLen(count) {
		return bad("bad count")
	}
	if count < 2 || count > MaxEnvelopeCommands || count > uint64(len(b)) {
		return bad(fmt.Sprintf("count %d outside 2..%d", count, MaxEnvelopeCommands))
	}
	b = b[n:]
	cmds := make([][]byte, 0, count)
	for range count {
		l, n := binary.Uvarint(b)
		if n <= 0 || n != uvarintLen(l) || l == 0 || l > uint64(len(b)-n) {
			return bad(fmt.Sprintf("command %d: bad length", len(cmds)))
		}
		cmds = append(cmds, b[n:n+int(l)])
		b = b[n+int(l):]
	}
	if len(b) != 0 {
		return bad(fmt.Sprintf("%d bytes after the last command", len(b)))
	}
	return cmds, nil
}

// DecodeCommands decodes a command log's data, one command or an envelope of several, for
// what reads a log outside the FSM (the simulator reads the stamps along a node's log). An
// error wraps fsm.ErrDecode: the envelope's framing, or one of its commands, is bad.
func DecodeCommands(data []byte) ([]*fsm.Command, error) {
	datas := [][]byte{data}
	if isEnvelope(data) {
		var err error
		if datas, err = splitEnvelope(data); err != nil {
			return nil, err
		}
	}
	cmds := make([]*fsm.Command, len(datas))
	for i, d := range datas {
		c, err := fsm.Decode(d)
		if err != nil {
			return nil, fmt.Errorf("command %d of %d: %w", i, len(datas), err)
		}
		cmds[i] = c
	}
	return cmds, nil
}
