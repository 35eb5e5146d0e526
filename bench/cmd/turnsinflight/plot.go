package main

import (
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plot draws, as benchreport draws benchmarks-scale.png, memory per turn
// in flight against N (exprd, xsai's generateText and streamText) and a
// text delta's latency against N (p50 and p99 direct and through exprd,
// p99 through streamText), N and the latency on log scales.
func (r *Report) plot(path string) error {
	series := func(f func(Row) float64) plotter.XYs {
		var xys plotter.XYs
		for _, row := range r.Rows {
			xys = append(xys, plotter.XY{X: float64(row.N), Y: f(row)})
		}
		return xys
	}
	logX := func(p *plot.Plot) {
		p.X.Label.Text = "turns in flight at once (N)"
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		p.Legend.Top, p.Legend.Left = true, true
	}
	mem := plot.New()
	mem.Title.Text = "Memory per turn in flight"
	mem.Y.Label.Text = "RSS growth / N (KiB)"
	logX(mem)
	mem.Y.Min = 0
	mem.Legend.Left = false
	if err := plotutil.AddLinePoints(mem,
		"exprd (exprd's process)", series(func(r Row) float64 { return r.Exprd.KiBPerTurn }),
		"xsai generateText (node)", series(func(r Row) float64 { return r.XSAI.KiBPerTurn }),
		"xsai streamText (node)", series(func(r Row) float64 { return r.XSAIStream.KiBPerTurn })); err != nil {
		return err
	}
	lat := plot.New()
	lat.Title.Text = "A text delta's latency (model write to client)"
	lat.Y.Label.Text = "ms"
	lat.Y.Scale, lat.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	logX(lat)
	msOf := func(ns int64) float64 { return max(float64(ns)/1e6, 0.01) }
	if err := plotutil.AddLinePoints(lat,
		"direct p50", series(func(r Row) float64 { return msOf(r.Direct.Client.Latency.P50) }),
		"direct p99", series(func(r Row) float64 { return msOf(r.Direct.Client.Latency.P99) }),
		"through exprd p50", series(func(r Row) float64 { return msOf(r.Exprd.Client.Latency.P50) }),
		"through exprd p99", series(func(r Row) float64 { return msOf(r.Exprd.Client.Latency.P99) }),
		"xsai streamText p99", series(func(r Row) float64 { return msOf(r.XSAIStream.Client.Latency.P99) })); err != nil {
		return err
	}

	img := vgimg.New(11*vg.Inch, 4*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 8, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align([][]*plot.Plot{{mem, lat}}, tiles, dc)
	mem.Draw(canvases[0][0])
	lat.Draw(canvases[0][1])
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
