package fsm

import "encoding/binary"

// EncodedLen returns an upper bound on the length of c's encoding: exactly
// len(AppendEncode(nil, c)) except that the command's time is counted at its
// widest (binary.MaxVarintLen64 bytes), because the Store stamps the time
// after it has sized the command (and so is a put-schedule's first
// occurrence, which follows from the time). It reads only lengths and counts, so a
// caller can size a command before handing it to the writer.
func EncodedLen(c *Command) int {
	k := kindOf(c.Kind)
	if k == nil {
		panic("fsm: size: unknown command kind " + c.Kind.String())
	}
	return 2 + binary.MaxVarintLen64 + k.size(c) // version, kind, now
}

// AckLen is the encoded length of one acknowledgement inside an acknowledge
// or acknowledge-batch command: its ID, token and outcome.
func AckLen(id string, token uint64, o *Outcome) int {
	n := strLen(id) + uvarintLen(token) + 1
	switch o.Status {
	case StatusCompleted:
		n += optLen(o.Result, o.HasRes)
	case StatusFailed:
		n += ErrorInfoLen(o.Error)
	}
	return n
}

// ErrorInfoLen is the encoded length of an error chain (AppendErrorInfo).
func ErrorInfoLen(e *ErrorInfo) int {
	n, depth := 0, 0
	for ; e != nil; e = e.Cause {
		depth++
		n += strLen(e.Name) + strLen(e.Message) + strLen(e.Code)
	}
	return n + uvarintLen(uint64(depth))
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func strLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

func optLen(s string, has bool) int {
	if !has {
		return 1
	}
	return uvarintLen(uint64(len(s))+1) + len(s)
}

func contextLen(ctx *[]KV) int {
	if ctx == nil {
		return 1
	}
	n := uvarintLen(uint64(len(*ctx)) + 1)
	for _, kv := range *ctx {
		n += strLen(kv.Key) + strLen(kv.Value)
	}
	return n
}
