package harness

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// thousands prints v rounded, with thousands separators.
func thousands(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// rateCell is a median with its spread: "123,456 (120,000–125,000)".
func rateCell(r Reps) string {
	if len(r) == 0 {
		return "-"
	}
	if len(r) == 1 {
		return thousands(r[0])
	}
	return fmt.Sprintf("%s (%s–%s)", thousands(r.Median()), thousands(r.Min()), thousands(r.Max()))
}

// latCell is a median latency with its spread.
func latCell(r Reps) string {
	if len(r) == 0 {
		return "-"
	}
	if len(r) == 1 {
		return fmtLatency(r[0])
	}
	return fmt.Sprintf("%s (%s–%s)", fmtLatency(r.Median()), fmtLatency(r.Min()), fmtLatency(r.Max()))
}

// ratio prints a/b as "12.3×".
func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return "-"
	}
	x := a / b
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f×", x)
	case x >= 10:
		return fmt.Sprintf("%.1f×", x)
	}
	return fmt.Sprintf("%.2f×", x)
}

func pendingLabel(n int) string {
	e := math.Log10(float64(n))
	if e == math.Trunc(e) {
		return fmt.Sprintf("10^%d", int(e))
	}
	return thousands(float64(n))
}
