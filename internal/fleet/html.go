package fleet

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/outcome"
)

// The rollout page (`muster report --html`) is one HTML file that works
// opened from disk at a site with no network: its CSS, SVG and script are
// inline, it names nothing outside itself, and its Content-Security-Policy
// lets the browser load nothing else either. Everything is drawn here, in
// Go, so the page reads the same with scripts off; the small script only
// filters, searches and sorts the node table. It is made from the same
// View as the JSON document, so it holds node names and the reasons hosts
// gave, and nothing the spool keeps secret.

var (
	//go:embed page.tmpl
	pageTemplate string
	//go:embed page.css
	pageCSS string
	//go:embed page.js
	pageJS string

	// The template is parsed, and the policy's digests taken, when a page
	// is first written: every muster process links this package, and
	// apply on a host's timer never writes a page.
	pageTmpl = sync.OnceValue(func() *template.Template {
		return template.Must(template.New("page").Parse(pageTemplate))
	})
	// pageCSP allows the page's own style and script, by digest, and
	// nothing else: no request leaves the file.
	pageCSP = sync.OnceValue(func() string {
		return "default-src 'none'; style-src '" + cspDigest(pageCSS) + "'; script-src '" + cspDigest(pageJS) +
			"'; base-uri 'none'; form-action 'none'"
	})
)

func cspDigest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// PageGenerations is how many generations the page charts unless told.
const PageGenerations = 20

// Page is what the rollout page shows.
type Page struct {
	View *View
	// Rollouts are the generations charted, newest first (State.Rollouts).
	Rollouts []Rollout
	// All lists the refused reports, as --all does in the JSON document.
	All bool
	// Made is when the page was made: every age on it is as of then.
	Made time.Time
	// Ago says how long ago something was, as the other outputs say it.
	Ago func(time.Duration) string
}

// pageStatuses are the statuses in the order the page counts them.
var pageStatuses = []Status{Applied, Failed, Outstanding, Ineligible, Unassigned, Held, Decommissioned}

// count is how many nodes of t have status st.
func count(t Totals, st Status) int {
	switch st {
	case Applied:
		return t.Applied
	case Failed:
		return t.Failed
	case Outstanding:
		return t.Outstanding
	case Ineligible:
		return t.Ineligible
	case Unassigned:
		return t.Unassigned
	case Held:
		return t.Held
	case Decommissioned:
		return t.Decommissioned
	}
	return 0
}

// The template's data: every figure is worked out here, none in the
// template.
type pageData struct {
	CSS           template.CSS
	JS            template.JS
	CSP           string
	Generation    uint64
	Newest        uint64
	Run, Commit   string
	Declared      stamp
	Expires       *stamp
	Expired       bool
	Made          stamp
	Manifest      bool
	Wave          string
	Nodes         int
	Counts        []statusCount
	Forks         []generation.Fork
	Flagged       []Object
	Refused       []Object
	RefusedCounts map[string]int
	RefusedListed bool
	History       []historyRow
	Chart         chart
	Chunks        [][]nodeRow // the node table's rows, pageChunk to a chunk
	DecomShown    bool
}

// stamp is a time shown absolute and as an age.
type stamp struct {
	Unix int64
	Abs  string
	Ago  string
}

type statusCount struct {
	Status Status
	N      int
}

type historyRow struct {
	Generation uint64
	Wave       string
	Declared   stamp
	Current    bool
	Manifest   bool
	Totals     Totals
	Counts     []statusCount
	Segments   []segment
	Assigned   int
	Half, Most string // how long until half and 90% of the assigned nodes applied
}

type segment struct {
	Status Status
	N      int
	X, W   string
}

type chart struct {
	W, H          int
	Left, Right   int
	Top, Bottom   int
	XTicks        []tick
	YTicks        []tick
	Curves        []curve
	Current       *curve
	Lo, Hi        string
	NoneAssigned  bool
	AnyApplied    bool
	CurrentMissed bool // the generation reported on has no curve
}

type tick struct {
	At    string
	Label string
}

type curve struct {
	Generation uint64
	Path       string
	EndX, EndY string
	Title      string
	Class      string
}

type nodeRow struct {
	Name        string
	Status      Status
	Order       int
	LastApplied uint64
	Contact     *stamp
	Lines       []outcome.Line
	Note        string
}

// printableLines are ls with their ids and details as a person is shown a
// host's text (outcome.Printable): a control or bidirectional character
// is as inert in a page as in a terminal, shown as its escape.
func printableLines(ls []outcome.Line) []outcome.Line {
	var out []outcome.Line
	for i, l := range ls {
		id, detail := outcome.Printable(l.ID), outcome.Printable(l.Detail)
		if out == nil && id == l.ID && detail == l.Detail {
			continue
		}
		if out == nil {
			out = slices.Clone(ls)
		}
		out[i].ID, out[i].Detail = id, detail
	}
	if out == nil {
		return ls
	}
	return out
}

// WriteHTML writes the rollout page of p.
func WriteHTML(w io.Writer, p Page) error {
	var b bytes.Buffer
	if err := pageTmpl().Execute(&b, p.data()); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

func (p Page) stamp(t time.Time) stamp {
	return stamp{Unix: t.Unix(), Abs: t.UTC().Format("2006-01-02 15:04 UTC"), Ago: p.Ago(p.Made.Sub(t))}
}

func (p Page) data() *pageData {
	v := p.View
	d := &pageData{
		CSS: template.CSS(pageCSS), JS: template.JS(pageJS), CSP: pageCSP(),
		Generation: v.Generation, Newest: v.Newest, Run: v.Run, Commit: v.Commit,
		Declared: p.stamp(v.DeclaredAt), Made: p.stamp(p.Made), Manifest: v.Manifest, Wave: v.Wave,
		Nodes: v.Totals.Nodes, Forks: v.Forks, Flagged: v.Flagged,
		RefusedCounts: v.RefusedCounts(), RefusedListed: p.All,
		DecomShown: p.All || v.Totals.Decommissioned > 0,
	}
	if !v.ExpiresAt.IsZero() {
		e := p.stamp(v.ExpiresAt)
		d.Expires, d.Expired = &e, p.Made.After(v.ExpiresAt)
	}
	if p.All {
		d.Refused = v.Refused
	}
	d.Counts = counts(v.Totals, d.DecomShown)
	for _, r := range p.Rollouts {
		d.History = append(d.History, p.historyRow(r, r.Generation == v.Generation, d.DecomShown))
	}
	d.Chart = p.chart()
	rows := make([]nodeRow, len(v.Nodes))
	for i := range v.Nodes {
		n := &v.Nodes[i]
		r := nodeRow{Name: n.Name, Status: n.Status, Order: statusOrder[n.Status], LastApplied: n.LastApplied,
			Lines: printableLines(n.FailedLines), Note: n.Note}
		if !n.LastContact.IsZero() {
			s := p.stamp(n.LastContact)
			r.Contact = &s
		}
		rows[i] = r
	}
	for len(rows) > 0 {
		n := min(pageChunk, len(rows))
		d.Chunks, rows = append(d.Chunks, rows[:n]), rows[n:]
	}
	return d
}

// pageChunk is how many rows of the node table are laid out together: a
// browser lays out only the chunks in view, so ten thousand nodes show at
// once.
const pageChunk = 100

// counts are the counts of t by status: decommissioned nodes only when
// decom, held ones only when there are some (a staged rollout), as report
// counts them.
func counts(t Totals, decom bool) []statusCount {
	var out []statusCount
	for _, st := range pageStatuses {
		if st == Decommissioned && !decom || st == Held && t.Held == 0 {
			continue
		}
		out = append(out, statusCount{st, count(t, st)})
	}
	return out
}

// historyRow is one generation's line of the history: a bar of its
// statuses, and how long its rollout took to reach half and 90% of the
// nodes assigned it.
func (p Page) historyRow(r Rollout, current, decom bool) historyRow {
	h := historyRow{Generation: r.Generation, Wave: r.Wave, Declared: p.stamp(r.DeclaredAt), Current: current, Manifest: r.Manifest,
		Totals: r.Totals, Counts: counts(r.Totals, decom), Assigned: r.Totals.Assigned()}
	x := 0
	for _, st := range pageStatuses {
		n := count(r.Totals, st)
		if n == 0 {
			continue
		}
		// The bar is 1000 wide; segments are placed by their running
		// total so that they always add up to the whole bar.
		end := 0
		if r.Totals.Nodes > 0 {
			end = int(math.Round(1000 * float64(sumUpTo(r.Totals, st)) / float64(r.Totals.Nodes)))
		}
		h.Segments = append(h.Segments, segment{Status: st, N: n, X: strconv.Itoa(x), W: strconv.Itoa(end - x)})
		x = end
	}
	h.Half, h.Most = reached(r, 0.5), reached(r, 0.9)
	return h
}

// sumUpTo counts the nodes of t in the statuses up to and including st,
// in page order.
func sumUpTo(t Totals, st Status) int {
	n := 0
	for _, s := range pageStatuses {
		n += count(t, s)
		if s == st {
			break
		}
	}
	return n
}

// reached says how long after the declare the share of the assigned nodes
// that applied reached share, "" if it has not.
func reached(r Rollout, share float64) string {
	a := r.Totals.Assigned()
	k := int(math.Ceil(share * float64(a)))
	if a == 0 || k > len(r.AppliedAfter) {
		return ""
	}
	return span(r.AppliedAfter[max(k-1, 0)])
}

// span is a duration as people read it on the page: 45s, 12m, 3h 5m,
// 2d 4h.
func span(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		h, m := int(d.Hours()), int(d.Minutes())%60
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh %dm", h, m)
	}
	days, h := int(d.Hours())/24, int(d.Hours())%24
	if h == 0 {
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd %dh", days, h)
}

// The chart's time axis is logarithmic, from a minute (or less, when nodes
// applied sooner) to the longest time it has to show: a rollout that takes
// minutes and a laptop that applies a week later both stay readable. Its
// ends and ticks are chosen from these.
var chartTicks = []struct {
	d     time.Duration
	label string
}{
	{time.Second, "1s"}, {10 * time.Second, "10s"}, {time.Minute, "1m"}, {5 * time.Minute, "5m"}, {15 * time.Minute, "15m"}, {time.Hour, "1h"},
	{6 * time.Hour, "6h"}, {24 * time.Hour, "1d"}, {7 * 24 * time.Hour, "1w"}, {30 * 24 * time.Hour, "30d"},
	{91 * 24 * time.Hour, "91d"}, {365 * 24 * time.Hour, "1y"}, {4 * 365 * 24 * time.Hour, "4y"},
}

// chart draws, for each generation charted, the share of the nodes
// assigned it that had applied it against the time since it was declared.
// Each curve ends at its last node applying, but the curve of the
// generation reported on, which goes on to when the page was made.
func (p Page) chart() chart {
	c := chart{W: 760, H: 260, Left: 44, Right: 748, Top: 12, Bottom: 226}
	// The longest time shown: the slowest node to apply, and how long
	// the generation reported on has been out.
	longest, soonest := 10*time.Minute, time.Minute
	var elapsed time.Duration
	for _, r := range p.Rollouts {
		if n := len(r.AppliedAfter); n > 0 {
			longest = max(longest, r.AppliedAfter[n-1])
			soonest = min(soonest, r.AppliedAfter[0])
		}
		if r.Generation == p.View.Generation {
			elapsed = p.Made.Sub(r.DeclaredAt)
			longest = max(longest, elapsed)
		}
	}
	lo, hi := chartTicks[0].d, chartTicks[len(chartTicks)-1].d
	for _, t := range chartTicks {
		if t.d <= soonest {
			lo = t.d
		}
	}
	for _, t := range chartTicks {
		if t.d >= longest {
			hi = t.d
			break
		}
	}
	c.Lo, c.Hi = span(lo), span(hi)
	span := math.Log(float64(hi) / float64(lo))
	x := func(d time.Duration) float64 {
		if d <= lo {
			return float64(c.Left)
		}
		f := math.Min(math.Log(float64(d)/float64(lo))/span, 1)
		return float64(c.Left) + f*float64(c.Right-c.Left)
	}
	y := func(share float64) float64 { return float64(c.Bottom) - share*float64(c.Bottom-c.Top) }
	for _, t := range chartTicks {
		if t.d < lo || t.d > hi {
			continue
		}
		c.XTicks = append(c.XTicks, tick{At: coord(x(t.d)), Label: t.label})
	}
	for _, s := range []float64{0, .25, .5, .75, 1} {
		c.YTicks = append(c.YTicks, tick{At: coord(y(s)), Label: fmt.Sprintf("%d%%", int(s*100))})
	}
	c.NoneAssigned = true
	// Oldest first, so that the newer curves are drawn over the older.
	for i := len(p.Rollouts) - 1; i >= 0; i-- {
		r := p.Rollouts[i]
		a := r.Totals.Assigned()
		current := r.Generation == p.View.Generation
		if a == 0 {
			continue
		}
		c.NoneAssigned = false
		c.AnyApplied = c.AnyApplied || len(r.AppliedAfter) > 0
		var path strings.Builder
		fmt.Fprintf(&path, "M%s %s", coord(x(0)), coord(y(0)))
		lastX, lastY := x(0), y(0)
		for k := 0; k < len(r.AppliedAfter); {
			// Nodes that applied within the same half pixel make one
			// step: a curve of ten thousand nodes stays a few hundred
			// points.
			px := math.Round(2*x(r.AppliedAfter[k])) / 2
			for k < len(r.AppliedAfter) && math.Round(2*x(r.AppliedAfter[k]))/2 == px {
				k++
			}
			py := y(float64(k) / float64(a))
			if px != lastX {
				fmt.Fprintf(&path, "H%s", coord(px))
			}
			fmt.Fprintf(&path, "V%s", coord(py))
			lastX, lastY = px, py
		}
		if current && x(elapsed) > lastX {
			lastX = x(elapsed)
			fmt.Fprintf(&path, "H%s", coord(lastX))
		}
		title := fmt.Sprintf("generation %d: %d of %d assigned nodes applied", r.Generation, len(r.AppliedAfter), a)
		if h := reached(r, 0.5); h != "" {
			title += ", half of them after " + h
		}
		if m := reached(r, 0.9); m != "" {
			title += ", 90% after " + m
		}
		cv := curve{Generation: r.Generation, Path: path.String(), EndX: coord(lastX), EndY: coord(lastY), Title: title, Class: "earlier"}
		switch {
		case current:
			cv.Class = "current"
			c.Current = &cv
			continue
		case i > 0 && p.Rollouts[i-1].Generation == p.View.Generation:
			cv.Class = "previous"
		}
		c.Curves = append(c.Curves, cv)
	}
	c.CurrentMissed = c.Current == nil
	return c
}

// coord is a chart coordinate, to a tenth of a unit.
func coord(f float64) string {
	return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64)
}
