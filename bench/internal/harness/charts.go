package harness

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// The charts draw log10 of each value on a linear axis with ticks labelled
// in the original unit: bars need a base, and a log axis has none at zero.

func writeCharts(out string, res *Results) error {
	if err := throughputChart(filepath.Join(out, "throughput.png"), res); err != nil {
		return err
	}
	if err := admissionChart(filepath.Join(out, "admission.png"), res); err != nil {
		return err
	}
	for _, load := range offeredLoads(res) {
		if err := latencyChart(filepath.Join(out, fmt.Sprintf("latency-%s.png", loadFile(load))), res, load); err != nil {
			return err
		}
	}
	return scaleChart(filepath.Join(out, "scale.png"), res)
}

func loadFile(load int) string {
	if load == 0 {
		return "flat"
	}
	return fmt.Sprint(load)
}

func offeredLoads(res *Results) []int {
	var out []int
	for _, r := range res.E2E {
		if !slices.Contains(out, r.Offered) {
			out = append(out, r.Offered)
		}
	}
	return out
}

// logTicks labels log10 positions lo..hi with unit(10^k).
func logTicks(lo, hi int, unit func(float64) string) plot.ConstantTicks {
	var t plot.ConstantTicks
	for k := lo; k <= hi; k++ {
		t = append(t, plot.Tick{Value: float64(k), Label: unit(math.Pow(10, float64(k)))})
	}
	return t
}

func perSecond(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.0fM/s", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0fk/s", v/1e3)
	}
	return fmt.Sprintf("%.0f/s", v)
}

func duration(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.0f s", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.0f ms", us/1e3)
	}
	return fmt.Sprintf("%.0f µs", us)
}

func log10or0(v float64) float64 {
	if v <= 1 || math.IsNaN(v) {
		return 0
	}
	return math.Log10(v)
}

// groupedBars draws horizontal bars: one row per name, one bar per series.
func groupedBars(file, title, xlabel string, names, series []string, values [][]float64, ticks plot.ConstantTicks) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.X.Tick.Marker = ticks
	p.X.Min, p.X.Max = ticks[0].Value, ticks[len(ticks)-1].Value
	w := vg.Points(min(14, 60/float64(max(len(series), 1))))
	for i, s := range series {
		bars, err := plotter.NewBarChart(plotter.Values(values[i]), w)
		if err != nil {
			return err
		}
		bars.Horizontal = true
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(i)
		bars.Offset = w * vg.Length(float64(i)-float64(len(series)-1)/2)
		p.Add(bars)
		if len(series) > 1 {
			p.Legend.Add(s, bars)
		}
	}
	p.Legend.Top = true
	p.NominalY(names...)
	p.Add(plotter.NewGrid())
	return p.Save(9*vg.Inch, vg.Length(1.2+0.45*float64(len(names)))*vg.Inch, file)
}

func throughputChart(file string, res *Results) error {
	if len(res.Claim) == 0 {
		return nil
	}
	cs, pendings := seriesIn(res.Claim), pendingsIn(res.Claim)
	var names []string
	for _, c := range cs {
		names = append(names, c.String())
	}
	names = append(names, "floor: raw tidwall/wal at execstore's batch (its best row)")
	var series []string
	var values [][]float64
	for _, pend := range pendings {
		series = append(series, pendingLabel(pend)+" pending")
		vals := make([]float64, len(names))
		for i, c := range cs {
			if r, ok := bestIn(res.Claim, c, pend); ok {
				vals[i] = log10or0(r.Rate.Median())
			}
		}
		if ex, ok := best(res.Claim, nameExec, pend); ok {
			vals[len(cs)] = log10or0(ex.Floor.Median())
		}
		values = append(values, vals)
	}
	slices.Reverse(names) // NominalY draws the first name at the bottom
	for _, v := range values {
		slices.Reverse(v)
	}
	return groupedBars(file, "Claim + complete, each at its best configuration in each mode", "executions claimed and completed per second (log)",
		names, series, values, logTicks(1, 7, perSecond))
}

func admissionChart(file string, res *Results) error {
	if len(res.Admission) == 0 {
		return nil
	}
	var names []string
	for _, r := range res.Admission {
		if !slices.Contains(names, r.System) {
			names = append(names, r.System)
		}
	}
	series := []string{"1 producer, one per call", "64 producers, one per call", "64 producers, best batch"}
	values := make([][]float64, len(series))
	for i := range values {
		values[i] = make([]float64, len(names))
	}
	for _, r := range res.Admission {
		i := slices.Index(names, r.System)
		v := log10or0(r.Rate.Median())
		switch {
		case r.Producers == 1 && r.Batch == 1:
			values[0][i] = v
		case r.Producers == 64 && r.Batch == 1:
			values[1][i] = v
			values[2][i] = max(values[2][i], v)
		case r.Producers == 64:
			values[2][i] = max(values[2][i], v)
		}
	}
	slices.Reverse(names)
	for _, v := range values {
		slices.Reverse(v)
	}
	return groupedBars(file, "Admission", "executions admitted per second (log)", names, series, values, logTicks(1, 7, perSecond))
}

func latencyChart(file string, res *Results, load int) error {
	var names []string
	values := make([][]float64, 3)
	for _, r := range res.E2E {
		if r.Offered != load {
			continue
		}
		names = append(names, r.System)
		for i, q := range []Reps{r.P50, r.P99, r.P999} {
			us := q.Median() * 1e6
			if math.IsInf(us, 1) || us > 1e7 {
				us = 1e7 // not completed: drawn at the chart's edge
			}
			values[i] = append(values[i], log10or0(us))
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Reverse(names)
	for _, v := range values {
		slices.Reverse(v)
	}
	return groupedBars(file, "Trigger to completed at "+offeredLabel(load)+" offered", "latency (log; 10 s means not completed)",
		names, []string{"p50", "p99", "p99.9"}, values, logTicks(1, 7, duration))
}

func scaleChart(file string, res *Results) error {
	var cs []claimSeries
	for _, r := range res.Scale {
		for _, chained := range []bool{false, true} {
			if c := (claimSeries{r.System, chained}); len(r.rate(chained)) > 0 && !slices.Contains(cs, c) {
				cs = append(cs, c)
			}
		}
	}
	if len(cs) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = "The scale curve: claim + complete by pending executions"
	p.X.Label.Text = "pending executions (log)"
	p.Y.Label.Text = "executions per second (log)"
	p.X.Tick.Marker = logTicks(4, 7, func(v float64) string { return pendingLabel(int(v)) })
	p.Y.Tick.Marker = logTicks(1, 7, perSecond)
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 3.8, 7.2, 1, 7
	var systems []string
	for _, c := range cs {
		if !slices.Contains(systems, c.System) {
			systems = append(systems, c.System)
		}
	}
	for _, c := range cs {
		var pts plotter.XYs
		for _, r := range res.Scale {
			if r.System == c.System && len(r.rate(c.Chained)) > 0 {
				pts = append(pts, plotter.XY{X: math.Log10(float64(r.Pending)), Y: log10or0(r.rate(c.Chained).Median())})
			}
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		i := slices.Index(systems, c.System) // a contender's colour and shape; one call dashed
		l.Color, sc.Color = plotutil.Color(i), plotutil.Color(i)
		sc.Shape = plotutil.Shape(i)
		if c.Chained {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l, sc)
		p.Legend.Add(c.String(), l, sc)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p.Save(9*vg.Inch, 5*vg.Inch, file)
}
