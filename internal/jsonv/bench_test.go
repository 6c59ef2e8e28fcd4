package jsonv

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// params200 is a typical child-start params object.
const params200 = `{"order_id":"ord_8f3a2c91","customer":{"id":"cus_42","email":"ada@example.com",` +
	`"tier":"gold"},"items":[{"sku":"A-100","qty":2,"price":19.99},{"sku":"B-220","qty":1,` +
	`"price":5.5}],"currency":"EUR","notify":true}`

// params10KiB is a larger result value: records with nested objects,
// arrays, non-ASCII text and escapes.
var params10KiB = func() []byte {
	var sb strings.Builder
	sb.WriteString(`{"batch_id":"b-2024-11-29-0001","source":"import\/csv","records":[`)
	for i := 0; sb.Len() < 10<<10-200; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		id := strconv.Itoa(10000 + i)
		sb.WriteString(`{"id":"rec-` + id + `","name":"Zoë Ångström","note":"line one\nline two \"quoted\"",` +
			`"tags":["alpha","beta","\u03b3"],"score":0.` + id + `,"active":true,` +
			`"address":{"street":"12 Rue de l'Église","city":"Zürich","zip":"8001"},"parent":null}`)
	}
	sb.WriteString(`],"meta":{"count":42,"complete":true,"checksum":"9f86d081884c7d65"}}`)
	return []byte(sb.String())
}()

var benchInputs = []struct {
	name string
	in   []byte
}{
	{"params-200B", []byte(params200)},
	{"params-10KiB", params10KiB},
	// A result carrying text: few tokens, long strings.
	{"text-8KiB", []byte(`{"stdout":"` + strings.Repeat("build step 3 of 7: compiling package ok; ", 100) +
		`","stderr":"` + strings.Repeat("warning: unused variable x at line 12; ", 100) + `","exit":0}`)},
	// Past 16 keys an object's duplicate check sorts its keys.
	{"object-1000-keys", []byte(manyKeys(1000, -1, -1))},
	// Every key has an escape, so every key is decoded.
	{"escaped-keys", []byte(strings.ReplaceAll(manyKeys(100, -1, -1), `"k`, `"\u006b`))},
}

func BenchmarkValidate(b *testing.B) {
	for _, bi := range benchInputs {
		b.Run(bi.name, func(b *testing.B) {
			b.SetBytes(int64(len(bi.in)))
			b.ReportAllocs()
			for b.Loop() {
				if err := Validate(bi.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkValidatorReused(b *testing.B) {
	for _, bi := range benchInputs {
		b.Run(bi.name, func(b *testing.B) {
			var v Validator
			b.SetBytes(int64(len(bi.in)))
			b.ReportAllocs()
			for b.Loop() {
				if err := v.Validate(bi.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCanonical(b *testing.B) {
	for _, bi := range benchInputs {
		b.Run(bi.name, func(b *testing.B) {
			dst := make([]byte, 0, len(bi.in))
			b.SetBytes(int64(len(bi.in)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = Canonical(dst[:0], bi.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodingJSONValid is the standard library's syntax check, which
// does less (no UTF-8, surrogate or duplicate check), for comparison.
func BenchmarkEncodingJSONValid(b *testing.B) {
	for _, bi := range benchInputs {
		b.Run(bi.name, func(b *testing.B) {
			b.SetBytes(int64(len(bi.in)))
			b.ReportAllocs()
			for b.Loop() {
				if !json.Valid(bi.in) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
