package harness

import (
	"encoding/json"
	"math"
	"slices"
)

// Reps is a measurement repeated: one value per run.
type Reps []float64

// Median is the middle run (the mean of the two middle ones for an even count).
func (r Reps) Median() float64 {
	if len(r) == 0 {
		return math.NaN()
	}
	s := slices.Clone(r)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Min and Max are the spread of the runs.
func (r Reps) Min() float64 {
	if len(r) == 0 {
		return math.NaN()
	}
	return slices.Min(r)
}

func (r Reps) Max() float64 {
	if len(r) == 0 {
		return math.NaN()
	}
	return slices.Max(r)
}

// percentile returns the q-quantile (0..1) of sorted durations by the
// nearest-rank rule; +Inf entries stand for requests that never finished.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(k, len(sorted)-1))]
}

// MarshalJSON writes +Inf (a request that never completed) as "inf", which
// JSON numbers cannot hold.
func (r Reps) MarshalJSON() ([]byte, error) {
	out := make([]any, len(r))
	for i, v := range r {
		out[i] = v
		if math.IsInf(v, 1) {
			out[i] = "inf"
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (r *Reps) UnmarshalJSON(b []byte) error {
	var in []any
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*r = make(Reps, len(in))
	for i, v := range in {
		switch x := v.(type) {
		case float64:
			(*r)[i] = x
		default:
			(*r)[i] = math.Inf(1)
		}
	}
	return nil
}
