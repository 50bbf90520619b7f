package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// benchRow matches a client's result row in the console:
// "  bench send_lat go #1 client|  64  2000  11.83 …".
var benchRow = regexp.MustCompile(`bench (\w+) (c|go) #\d client\|\s+(\d[\d.\s]*)$`)

// figure is one number of the comparison.
type figure struct {
	name  string
	col   int  // column in the row
	lower bool // lower is better (latency), else higher (rates)
}

var figures = map[string][]figure{
	"lat": {{"t_typical [µs]", 4, true}, {"t_avg [µs]", 5, true}, {"99% [µs]", 7, true}},
	"bw":  {{"BW average [MB/s]", 3, false}, {"MsgRate [Mpps]", 4, false}},
}

// sideBySideTable averages each side's runs and prints goverbs/rdma-core
// ratios, as Markdown.
func sideBySideTable(console []string) string {
	sums := map[string][]float64{} // test/side -> column sums
	counts := map[string]int{}
	for _, l := range console {
		m := benchRow.FindStringSubmatch(strings.TrimRight(l, " \t"))
		if m == nil {
			continue
		}
		var cols []float64
		for _, f := range strings.Fields(m[3]) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				break
			}
			cols = append(cols, v)
		}
		key := m[1] + "/" + m[2]
		if s, ok := sums[key]; ok && len(s) == len(cols) {
			for i := range cols {
				s[i] += cols[i]
			}
		} else {
			sums[key] = cols
		}
		counts[key]++
	}
	var b strings.Builder
	b.WriteString("| test | figure | rdma-core | goverbs | goverbs / rdma-core |\n|---|---|---|---|---|\n")
	for _, bp := range benchPairs {
		kind := "lat"
		if strings.HasSuffix(bp.test, "_bw") {
			kind = "bw"
		}
		c, g := sums[bp.test+"/c"], sums[bp.test+"/go"]
		for _, f := range figures[kind] {
			if f.col >= len(c) || f.col >= len(g) {
				fmt.Fprintf(&b, "| %s %dB | %s | – | – | missing |\n", bp.test, bp.size, f.name)
				continue
			}
			cv := c[f.col] / float64(counts[bp.test+"/c"])
			gv := g[f.col] / float64(counts[bp.test+"/go"])
			ratio := gv / cv
			fmt.Fprintf(&b, "| %s %dB | %s | %.3g | %.3g | %.2f× |\n", bp.test, bp.size, f.name, cv, gv, ratio)
		}
	}
	return b.String()
}

// writePerformance puts the side-by-side tables into docs/PERFORMANCE.md,
// between markers, keeping the rest of the file.
func writePerformance(root string, tables map[string]string, order []string) error {
	p := filepath.Join(root, "docs", "PERFORMANCE.md")
	old, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	const begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n## goverbs against rdma-core, side by side (`make bench`)\n\n", begin)
	fmt.Fprintf(&b, "%s, QEMU TCG on this project's 2-core machine. Each pair ran with the same\n"+
		"parameters in the order rdma-core, goverbs, goverbs, rdma-core, and each figure is the\n"+
		"mean of its two runs. TCG timings are comparable only as ratios within one run.\n\n",
		time.Now().UTC().Format("2006-01-02"))
	for _, k := range order {
		fmt.Fprintf(&b, "### %s\n\n%s\n", k, tables[k])
	}
	b.WriteString(end)
	s := string(old)
	if i, j := strings.Index(s, begin), strings.Index(s, end); i >= 0 && j > i {
		s = s[:i] + b.String() + s[j+len(end):]
	} else {
		s = strings.TrimRight(s, "\n") + "\n\n" + b.String() + "\n"
	}
	return os.WriteFile(p, []byte(s), 0o644)
}
