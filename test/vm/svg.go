package main

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// The chart of make bench (docs/performance.svg), drawn by hand: one row
// per kernel with three panels, rdma-core in grey and goverbs in blue.
//
//   - latency: for send_lat and write_lat, a bar to the median and a
//     whisker to the 99th percentile, on a log scale;
//   - message rate: send_bw and write_bw (perftest's MsgRate) and
//     rc_pingpong round trips, in thousands per second;
//   - hot paths: goverbs / rdma-core for each Go benchmark against its C
//     twin, with the 1.0 line and the targets.

const (
	svgW      = 1080
	svgRowH   = 300
	svgHeadH  = 56
	colC      = "#8a8f98"
	colGo     = "#00add8"
	colTarget = "#d9480f"
)

type svgDoc struct{ b strings.Builder }

func (d *svgDoc) f(format string, args ...any) { fmt.Fprintf(&d.b, format, args...) }

func (d *svgDoc) text(x, y float64, anchor, size, weight, s string) {
	d.f(`<text x="%.1f" y="%.1f" text-anchor="%s" font-size="%s" font-weight="%s">%s</text>`+"\n", x, y, anchor, size, weight, html.EscapeString(s))
}

func (d *svgDoc) rect(x, y, w, h float64, fill string) {
	if h < 0 {
		y, h = y+h, -h
	}
	d.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, y, math.Max(w, 0), h, fill)
}

func (d *svgDoc) line(x1, y1, x2, y2 float64, stroke string, width float64, dash bool) {
	extra := ""
	if dash {
		extra = ` stroke-dasharray="4 3"`
	}
	d.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"%s/>`+"\n", x1, y1, x2, y2, stroke, width, extra)
}

// benchSVG draws the chart for every kernel's results.
func benchSVG(results []*benchResult, date string) string {
	h := svgHeadH + svgRowH*len(results) + 10
	d := &svgDoc{}
	d.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">`+"\n", svgW, h, svgW, h)
	d.f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	d.text(16, 24, "start", "16", "bold", "goverbs against rdma-core on soft-RoCE (rxe), make bench, "+date)
	d.text(16, 44, "start", "12", "normal", "QEMU TCG: compare only within one run, as ratios.")
	d.rect(640, 32, 12, 12, colC)
	d.text(657, 43, "start", "12", "normal", "rdma-core (perftest, ibv_rc_pingpong, libibverbs)")
	d.rect(955, 32, 12, 12, colGo)
	d.text(972, 43, "start", "12", "normal", "goverbs")
	for i, r := range results {
		y0 := float64(svgHeadH + i*svgRowH)
		d.text(16, y0+22, "start", "14", "bold", r.Kernel)
		latencyPanel(d, r, 16, y0+34, 300, svgRowH-70)
		ratePanel(d, r, 376, y0+34, 280, svgRowH-70)
		ratioPanel(d, r, 716, y0+34, 348, svgRowH-70)
	}
	d.f("</svg>\n")
	return d.b.String()
}

func (r *benchResult) tool(side, key string) float64 {
	if side == "c" {
		return median(r.ToolC[key])
	}
	return median(r.ToolGo[key])
}

// latencyPanel: median bars and p99 whiskers, log scale.
func latencyPanel(d *svgDoc, r *benchResult, x, y, w, h float64) {
	d.text(x, y+8, "start", "12", "bold", "Latency, µs: median bar, p99 whisker (lower better)")
	top, bottom := y+24, y+h
	left := x + 40
	hi := 10.0
	tests := []string{"send_lat", "write_lat"}
	for _, t := range tests {
		for _, s := range []string{"c", "go"} {
			if v := r.tool(s, t+"/99% [µs]"); !math.IsNaN(v) {
				hi = math.Max(hi, v)
			}
		}
	}
	lo := 1.0
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	ys := func(v float64) float64 {
		v = math.Max(v, lo)
		return bottom - (math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*(bottom-top)
	}
	for v := lo; v <= hi*1.0001; v *= 10 {
		d.line(left, ys(v), x+w, ys(v), "#e5e5e5", 1, false)
		d.text(left-4, ys(v)+4, "end", "10", "normal", tick(v))
	}
	d.line(left, bottom, x+w, bottom, "#333", 1, false)
	gw := (x + w - left) / float64(len(tests))
	for i, t := range tests {
		gx := left + float64(i)*gw
		d.text(gx+gw/2, bottom+16, "middle", "11", "normal", t)
		for j, s := range []string{"c", "go"} {
			col := colC
			if s == "go" {
				col = colGo
			}
			bx := gx + gw*0.18 + float64(j)*gw*0.34
			bw := gw * 0.28
			med, p99 := r.tool(s, t+"/t_typical [µs]"), r.tool(s, t+"/99% [µs]")
			if math.IsNaN(med) {
				continue
			}
			d.rect(bx, ys(med), bw, bottom-ys(med), col)
			d.text(bx+bw/2, ys(med)+12, "middle", "10", "normal", num(med))
			if !math.IsNaN(p99) {
				cx := bx + bw/2
				d.line(cx, ys(med), cx, ys(p99), "#222", 1.2, false)
				d.line(cx-bw/4, ys(p99), cx+bw/4, ys(p99), "#222", 1.2, false)
				d.text(cx, ys(p99)-4, "middle", "10", "normal", num(p99))
			}
		}
	}
}

// ratePanel: messages per second, in thousands, linear.
func ratePanel(d *svgDoc, r *benchResult, x, y, w, h float64) {
	d.text(x, y+8, "start", "12", "bold", "Message rate, thousands/s (higher better)")
	top, bottom := y+30, y+h
	left := x + 36
	type grp struct {
		label string
		val   func(side string) float64
	}
	groups := []grp{
		{"send_bw", func(s string) float64 { return r.tool(s, "send_bw/MsgRate [Mpps]") * 1000 }},
		{"write_bw", func(s string) float64 { return r.tool(s, "write_bw/MsgRate [Mpps]") * 1000 }},
		{"rc_pingpong", func(s string) float64 { return 1000 / r.tool(s, "pingpong/usec/iter") }},
	}
	hi := 0.0
	for _, g := range groups {
		for _, s := range []string{"c", "go"} {
			if v := g.val(s); !math.IsNaN(v) {
				hi = math.Max(hi, v)
			}
		}
	}
	if hi <= 0 {
		hi = 1
	}
	step := niceStep(hi / 4)
	hi = math.Ceil(hi/step) * step
	ys := func(v float64) float64 { return bottom - v/hi*(bottom-top) }
	for v := 0.0; v <= hi*1.0001; v += step {
		d.line(left, ys(v), x+w, ys(v), "#e5e5e5", 1, false)
		d.text(left-4, ys(v)+4, "end", "10", "normal", tick(v))
	}
	d.line(left, bottom, x+w, bottom, "#333", 1, false)
	gw := (x + w - left) / float64(len(groups))
	for i, g := range groups {
		gx := left + float64(i)*gw
		d.text(gx+gw/2, bottom+16, "middle", "11", "normal", g.label)
		for j, s := range []string{"c", "go"} {
			v := g.val(s)
			if math.IsNaN(v) {
				continue
			}
			col := colC
			if s == "go" {
				col = colGo
			}
			bx := gx + gw*0.14 + float64(j)*gw*0.38
			bw := gw * 0.34
			d.rect(bx, ys(v), bw, bottom-ys(v), col)
			d.text(bx+bw/2, ys(v)-4, "middle", "10", "normal", num(v))
		}
	}
}

// ratioPanel: goverbs / rdma-core per hot-path benchmark, horizontal bars.
func ratioPanel(d *svgDoc, r *benchResult, x, y, w, h float64) {
	d.text(x, y+8, "start", "12", "bold", "Hot paths, goverbs / rdma-core (lower better)")
	labels := map[string]string{
		"PollEmpty": "empty poll", "PollDrain/batch=1": "poll/CQE, batch 1", "PollDrain/batch=16": "poll/CQE, batch 16",
		"PollDrain/batch=64": "poll/CQE, batch 64", "ReqNotify": "ReqNotify", "EventRoundTrip": "event round trip",
		"PostPoll": "post+poll", "PostSend": "PostSend/WR", "PostRecv": "PostRecv/WR",
		"PostSRQRecv": "SRQ PostRecv/WR",
	}
	top := y + 22
	left := x + 112
	right := x + w - 36
	const maxRatio = 2.0
	xs := func(v float64) float64 { return left + math.Min(v, maxRatio)/maxRatio*(right-left) }
	rowH := (h - 40) / float64(len(microOrder))
	bottom := top + rowH*float64(len(microOrder))
	for _, v := range []float64{0, 0.5, 1, 1.5, 2} {
		d.line(xs(v), top, xs(v), bottom, "#e5e5e5", 1, false)
		d.text(xs(v), bottom+14, "middle", "10", "normal", fmt.Sprintf("%.1f×", v))
	}
	for i, name := range microOrder {
		ry := top + float64(i)*rowH
		d.text(left-6, ry+rowH*0.65, "end", "11", "normal", labels[name])
		ratio := best(r.MicroGo[name]) / best(r.MicroC[name])
		if math.IsNaN(ratio) || math.IsInf(ratio, 0) {
			d.text(left+4, ry+rowH*0.65, "start", "10", "normal", "no C figure")
			continue
		}
		col := colGo
		if t, ok := microTargets[name]; ok && ratio > t {
			col = "#74c0d6"
		}
		d.rect(left, ry+rowH*0.18, xs(ratio)-left, rowH*0.64, col)
		label := fmt.Sprintf("%.2f×", ratio)
		if ratio > maxRatio {
			label += " →"
		}
		d.text(xs(ratio)+4, ry+rowH*0.65, "start", "10", "normal", label)
		if t, ok := microTargets[name]; ok {
			d.line(xs(t), ry+rowH*0.08, xs(t), ry+rowH*0.92, colTarget, 2, false)
		}
	}
	d.line(xs(1), top, xs(1), bottom, "#333", 1.2, true)
	d.line(left+4, bottom+24, left+16, bottom+24, colTarget, 2, false)
	d.text(left+20, bottom+28, "start", "10", "normal", "target (poll)   dashed: parity with rdma-core")
}

// tick formats an axis value: 1, 2.5, 10, 10000.
func tick(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// niceStep rounds a raw axis step to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}
