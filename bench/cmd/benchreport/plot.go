package main

import (
	"fmt"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// stateBytes are the state sizes of bench:StateSize, for the x axis.
var stateBytes = map[string]float64{"1KB": 1 << 10, "100KB": 100 << 10, "10MB": 10 << 20}

// plot draws the scale figures: time per call against the state's size
// (log-log) and against the steps in a call.
func (r report) plot(path string) error {
	bySize := plot.New()
	bySize.Title.Text = "One call vs state size"
	bySize.X.Label.Text = "state (bytes of JSON)"
	bySize.Y.Label.Text = "time per call (µs)"
	bySize.X.Scale, bySize.Y.Scale = plot.LogScale{}, plot.LogScale{}
	bySize.X.Tick.Marker, bySize.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	var lines []any
	for _, kind := range []string{"snapshot", "point", "scan"} {
		var xys plotter.XYs
		for _, size := range stateSizesNames {
			if s, ok := r.results.stat("bench:StateSize/"+size+"/"+kind, "ns/op"); ok {
				xys = append(xys, plotter.XY{X: stateBytes[size], Y: s.Median / 1e3})
			}
		}
		lines = append(lines, kind, xys)
	}
	if err := plotutil.AddLinePoints(bySize, lines...); err != nil {
		return err
	}
	bySize.Legend.Top, bySize.Legend.Left = true, true

	bySteps := plot.New()
	bySteps.Title.Text = "One call vs steps (100 KB state)"
	bySteps.X.Label.Text = "steps in the call"
	bySteps.Y.Label.Text = "time per call (µs)"
	var steps plotter.XYs
	for _, n := range stepCountsPlotted {
		if s, ok := r.results.stat(fmt.Sprintf("bench:Steps/steps=%d", n), "ns/op"); ok {
			steps = append(steps, plotter.XY{X: float64(n), Y: s.Median / 1e3})
		}
	}
	if err := plotutil.AddLinePoints(bySteps, "steps", steps); err != nil {
		return err
	}
	bySteps.Legend.Top, bySteps.Legend.Left = true, true

	img := vgimg.New(11*vg.Inch, 4*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 8, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align([][]*plot.Plot{{bySize, bySteps}}, tiles, dc)
	bySize.Draw(canvases[0][0])
	bySteps.Draw(canvases[0][1])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
