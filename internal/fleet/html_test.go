package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/outcome"
)

// testAgo says how long ago in whole hours: the page shows an age as the
// function it is given says it (muster's is the command line's).
func testAgo(d time.Duration) string {
	return fmt.Sprintf("%dh ago", int(d.Hours()))
}

// renderPage makes the page of generation gen (0: the newest) of s, as
// report --html does, and returns it and its parsed document.
func renderPage(t testing.TB, s *State, gen uint64, sel Selection, made time.Time) (string, *html.Node) {
	t.Helper()
	ctx := context.Background()
	v, err := s.Generation(ctx, gen, sel)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.Rollouts(ctx, v.Generation, PageGenerations, sel)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, Page{View: v, Rollouts: rs, All: sel.All, Made: made, Ago: testAgo}); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), doc
}

// writePage keeps a page where a browser test can load it.
func writePage(t testing.TB, page string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(p, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// byID returns the element with id, failing the test when there is none.
func byID(t testing.TB, doc *html.Node, id string) *html.Node {
	t.Helper()
	var found *html.Node
	walk(doc, func(n *html.Node) {
		if found == nil && n.Type == html.ElementNode && attr(n, "id") == id {
			found = n
		}
	})
	if found == nil {
		t.Fatalf("the page has no element with id %q", id)
	}
	return found
}

func walk(n *html.Node, fn func(*html.Node)) {
	fn(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, fn)
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// elements returns the elements under n named tag.
func elements(n *html.Node, tag string) []*html.Node {
	var out []*html.Node
	walk(n, func(c *html.Node) {
		if c.Type == html.ElementNode && c.Data == tag {
			out = append(out, c)
		}
	})
	return out
}

// text is the text under n, its spaces collapsed.
func text(n *html.Node) string {
	var b strings.Builder
	var visit func(*html.Node)
	visit = func(c *html.Node) {
		switch {
		case c.Type == html.TextNode:
			b.WriteString(c.Data)
		case c.Type == html.ElementNode && c.Data == "svg":
			return // a chart's text is in its caption and legend
		case c.Type == html.ElementNode:
			b.WriteString(" ") // cells and lines read apart
		}
		for k := c.FirstChild; k != nil; k = k.NextSibling {
			visit(k)
		}
	}
	visit(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// nodeRows returns the node table's rows by node name: status, last
// applied, last contact, detail.
func nodeRows(t testing.TB, doc *html.Node) map[string][]string {
	t.Helper()
	rows := map[string][]string{}
	for _, tr := range elements(byID(t, doc, "node-table"), "tr") {
		if attr(tr, "data-o") == "" {
			continue
		}
		var cells []string
		for _, td := range elements(tr, "td") {
			cells = append(cells, text(td))
		}
		if attr(tr, "class") != cells[1] {
			t.Errorf("row %s: class %q, status %q", cells[0], attr(tr, "class"), cells[1])
		}
		rows[cells[0]] = cells[1:]
	}
	return rows
}

// checkSelfContained fails unless the page names nothing outside itself:
// no URL, no source or link attribute but to a place in the page, and a
// policy that lets the browser load nothing else.
func checkSelfContained(t testing.TB, page string, doc *html.Node) {
	t.Helper()
	if m := regexp.MustCompile(`(?i)[a-z][a-z0-9+.-]*://|@import|url\((?:[^#)]|$)`).FindString(page); m != "" {
		t.Errorf("the page names something outside itself: %q", m)
	}
	walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		for _, a := range n.Attr {
			switch a.Key {
			case "src", "srcset", "action", "formaction", "poster", "data", "xlink:href", "background", "ping":
				t.Errorf("<%s %s=%q>: the page loads nothing", n.Data, a.Key, a.Val)
			case "href":
				if !strings.HasPrefix(a.Val, "#") {
					t.Errorf("<%s href=%q>: the page links only within itself", n.Data, a.Val)
				}
			case "style":
				t.Errorf("<%s style=%q>: the policy allows the page's one style sheet only", n.Data, a.Val)
			}
			if strings.HasPrefix(a.Key, "on") {
				t.Errorf("<%s %s>: the policy allows the page's one script only", n.Data, a.Key)
			}
		}
		if n.Data == "link" || n.Data == "iframe" || n.Data == "img" || n.Data == "object" || n.Data == "embed" {
			t.Errorf("the page has a <%s>", n.Data)
		}
	})
	var csp string
	walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "meta" && strings.EqualFold(attr(n, "http-equiv"), "content-security-policy") {
			csp = attr(n, "content")
		}
	})
	if !strings.HasPrefix(csp, "default-src 'none';") {
		t.Errorf("content security policy %q, want one that starts with default-src 'none'", csp)
	}
	scripts := elements(doc, "script")
	if len(scripts) != 1 {
		t.Fatalf("%d scripts, want the page's one", len(scripts))
	}
	if js := text(scripts[0]); !strings.Contains(csp, cspDigest(scripts[0].FirstChild.Data)) || len(js) > 8<<10 {
		t.Errorf("the script (%d bytes) is not the small one the policy allows", len(js))
	}
	styles := elements(doc, "style")
	if len(styles) != 1 || !strings.Contains(csp, cspDigest(styles[0].FirstChild.Data)) {
		t.Errorf("the style sheet is not the one the policy allows")
	}
}

// A mesh that declared a generation no node has reported yet: the nodes
// are outstanding, not failed, the chart says none applied, and the page
// is whole.
func TestPageNoReportsYet(t *testing.T) {
	f := newFixture(t)
	var man generation.Manifest
	for _, name := range []string{"web-1", "web-2", "laptop"} {
		id := f.enrol(name, t0)
		man.Nodes = append(man.Nodes, assign(id))
	}
	f.brief(f.reg.Nodes["web-1"].Current, 1, t0.Add(10*time.Minute))
	f.commit(1, t0.Add(time.Hour), &man)
	made := t0.Add(3 * time.Hour)
	page, doc := renderPage(t, f.load(false), 0, Selection{}, made)
	checkSelfContained(t, page, doc)

	if got := text(byID(t, doc, "counts")); got != "3 nodes 0 applied 0 failed 3 outstanding 0 ineligible 0 unassigned" {
		t.Errorf("counts %q", got)
	}
	if got := text(byID(t, doc, "declared")); !strings.Contains(got, "Declared 2026-11-01 10:00 UTC (2h ago)") {
		t.Errorf("declared %q", got)
	}
	rows := nodeRows(t, doc)
	want := map[string][]string{
		"web-1":  {"outstanding", "none", "2026-11-01 09:10 UTC 2h ago", ""},
		"web-2":  {"outstanding", "none", "never", ""},
		"laptop": {"outstanding", "none", "never", ""},
	}
	for name, w := range want {
		if got := rows[name]; strings.Join(got, "|") != strings.Join(w, "|") {
			t.Errorf("row %s: %q, want %q", name, got, w)
		}
	}
	hist := elements(elements(byID(t, doc, "history"), "tbody")[0], "tr")
	if len(hist) != 1 || !strings.Contains(text(hist[0]), "3 outstanding not yet not yet") {
		t.Errorf("history %q", text(hist[0]))
	}
	if got := text(byID(t, doc, "chart-caption")); !strings.Contains(got, "No node has applied one yet") {
		t.Errorf("chart caption %q", got)
	}
}

// Every node applied every generation: the bars are whole, the times to
// half and 90% applied are the nodes' own, and each generation has its
// curve, the one reported on drawn as the current one.
func TestPageAllApplied(t *testing.T) {
	f := newFixture(t)
	var ids []*enrol.Identity
	for i := range 10 {
		ids = append(ids, f.enrol(fmt.Sprintf("web-%02d", i), t0))
	}
	for g := uint64(1); g <= 3; g++ {
		var man generation.Manifest
		for _, id := range ids {
			man.Nodes = append(man.Nodes, assign(id))
		}
		at := t0.Add(time.Duration(g) * 24 * time.Hour)
		f.commit(g, at, &man)
		for i, id := range ids {
			// node i applies (i+1) minutes times the generation after
			// the declare; a report that failed first does not count.
			if i == 0 {
				f.write(id, g, 1, f.report(id, g, at.Add(30*time.Second), "file:/etc/motd"))
			}
			f.reportOK(id, g, 2, at.Add(time.Duration(i+1)*time.Duration(g)*time.Minute))
		}
	}
	made := t0.Add(3*24*time.Hour + 2*time.Hour)
	page, doc := renderPage(t, f.load(false), 0, Selection{}, made)
	checkSelfContained(t, page, doc)

	if got := text(byID(t, doc, "counts")); got != "10 nodes 10 applied 0 failed 0 outstanding 0 ineligible 0 unassigned" {
		t.Errorf("counts %q", got)
	}
	for name, row := range nodeRows(t, doc) {
		if row[0] != "applied" || row[1] != "3" {
			t.Errorf("row %s: %q", name, row)
		}
	}
	hist := elements(elements(byID(t, doc, "history"), "tbody")[0], "tr")
	wantHist := []string{
		// half: the 5th node, at 5×g minutes; 90%: the 9th, at 9×g.
		"3 2026-11-04 09:00 UTC 2h ago 10 applied 15m 27m",
		"2 2026-11-03 09:00 UTC 26h ago 10 applied 10m 18m",
		"1 2026-11-02 09:00 UTC 50h ago 10 applied 5m 9m",
	}
	if len(hist) != len(wantHist) {
		t.Fatalf("%d history rows, want %d", len(hist), len(wantHist))
	}
	for i, w := range wantHist {
		if got := text(hist[i]); got != w {
			t.Errorf("history row %d: %q, want %q", i, got, w)
		}
		rects := elements(hist[i], "rect")
		if len(rects) != 1 || attr(rects[0], "class") != "applied" || attr(rects[0], "width") != "1000" {
			t.Errorf("history row %d: the bar is not whole applied", i)
		}
	}
	paths := elements(byID(t, doc, "chart"), "path")
	if len(paths) != 3 {
		t.Fatalf("%d curves, want 3", len(paths))
	}
	classes := []string{attr(paths[0], "class"), attr(paths[1], "class"), attr(paths[2], "class")}
	if strings.Join(classes, " ") != "earlier previous current" {
		t.Errorf("curves %q, want earlier, previous, current (drawn last)", classes)
	}
	if got := text(paths[2]); got != "generation 3: 10 of 10 assigned nodes applied, half of them after 15m, 90% after 27m" {
		t.Errorf("current curve says %q", got)
	}
	// The curve rises ten steps, and ends at 100% (the top of the chart).
	d := attr(paths[2], "d")
	if n := strings.Count(d, "V"); n != 10 || !strings.HasSuffix(d, "V12") && !strings.Contains(d, "V12H") {
		t.Errorf("current curve %q: want 10 steps up to 100%%", d)
	}
}

// Failed nodes show the reasons their hosts gave, whole, however long, and
// as text: a reason with markup in it cannot add to the page.
func TestPageFailedWithLongReasons(t *testing.T) {
	f := newFixture(t)
	web1, web2, db1 := f.enrol("web-1", t0), f.enrol("web-2", t0), f.enrol("db-1", t0)
	build := f.enrol("build-<em>1</em>", t0)
	f.brief(build, 1, t0, `disk"><script>alert(2)</script>`)
	f.commit(1, t0.Add(time.Hour), &generation.Manifest{
		Nodes: []generation.ManifestNode{assign(web1), assign(web2), assign(db1)}, Ineligible: []string{build.Name}})
	long := strings.Repeat("dpkg: error processing archive /var/cache/apt/archives/nginx.deb (--unpack): ", 60)
	r := f.report(web1, 1, t0.Add(2*time.Hour))
	r.Lines = append(r.Lines,
		outcomeLine("package:nginx", long),
		outcomeLine("service:nginx", `</td></tr><script>alert(1)</script><tr><td>`),
		outcomeLine("file:/etc/a&b", `mode 0644 & owner "root" differ`),
		outcomeLine("file:/etc/motd", "purged \x1b]0;owned\x07 and \u202eexe.txt"))
	f.write(web1, 1, 1, r)
	f.write(web2, 1, 1, f.report(web2, 1, t0.Add(2*time.Hour), "service:nginx"))
	f.reportOK(db1, 1, 1, t0.Add(2*time.Hour))
	page, doc := renderPage(t, f.load(false), 0, Selection{}, t0.Add(3*time.Hour))
	checkSelfContained(t, page, doc)

	if got := text(byID(t, doc, "counts")); got != "4 nodes 1 applied 2 failed 0 outstanding 1 ineligible 0 unassigned" {
		t.Errorf("counts %q", got)
	}
	rows := nodeRows(t, doc)
	if len(rows) != 4 {
		t.Fatalf("%d rows: %q; want 4", len(rows), rows)
	}
	w1 := rows["web-1"]
	if w1[0] != "failed" || !strings.HasPrefix(w1[3], "4 failed lines: package:nginx package:nginx: dpkg: error") {
		t.Errorf("web-1: %q", w1)
	}
	for _, want := range []string{strings.TrimSpace(long), `service:nginx: </td></tr><script>alert(1)</script><tr><td>`, `file:/etc/a&b: mode 0644 & owner "root" differ`} {
		if !strings.Contains(w1[3], strings.Join(strings.Fields(want), " ")) {
			t.Errorf("web-1's failed lines do not show %.60q as the host gave it", want)
		}
	}
	if got := rows["build-<em>1</em>"]; len(got) == 0 || got[0] != "ineligible" || !strings.Contains(got[3], `disk"><script>alert(2)</script>: disk"><script>alert(2)</script> check failed`) {
		t.Errorf("build-<em>1</em>: %q", got)
	}
	// The markup is in the page as text only.
	for _, markup := range []string{"<script>alert", "<em>1</em>", "</td></tr><script>"} {
		if i := strings.Index(page, markup); i >= 0 {
			t.Errorf("markup from a reason or a name is in the page as markup: %q", page[max(i-80, 0):i+len(markup)])
		}
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the reason with markup is not in the page, escaped")
	}
	// A control or bidirectional character is shown as its escape, as
	// in a terminal (muster(1), QUOTED TEXT).
	if !strings.Contains(w1[3], `file:/etc/motd: purged \x1b]0;owned\a and \u202eexe.txt`) || strings.ContainsAny(page, "\x1b\u202e") {
		t.Errorf("a control character of a host's line is in the page as it is: %q", w1[3])
	}
	// The failed lines open on click: each failed node's are in a
	// <details>, whose summary names the first.
	details := elements(byID(t, doc, "node-table"), "details")
	if len(details) != 3 {
		t.Errorf("%d <details>, want one per node with failed lines (3)", len(details))
	}
}

func outcomeLine(id, detail string) outcome.Line {
	return outcome.Line{ID: id, Status: outcome.Failed, Detail: detail}
}

// Ten thousand nodes over fifty generations: the page is under 5 MB, has
// every node, charts the last 20 generations with curves of a bounded
// number of points, and finds the failed nodes' reasons.
func TestPage10000Nodes50Generations(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a fleet of 10,000 nodes")
	}
	ff, page := bigFleetPage(t)
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, page, doc)
	t.Logf("page: %d bytes", len(page))
	if len(page) >= 5<<20 {
		t.Errorf("the page is %d bytes, want under 5 MB", len(page))
	}
	rows := nodeRows(t, doc)
	if len(rows) != 10000 {
		t.Errorf("%d rows, want 10000", len(rows))
	}
	// In chunks a browser lays out one at a time, all of one size.
	chunks := elements(byID(t, doc, "node-table"), "tbody")
	if len(chunks) != 10000/pageChunk {
		t.Errorf("%d chunks of rows, want %d", len(chunks), 10000/pageChunk)
	}
	for i, c := range chunks {
		if n := len(elements(c, "tr")); n != pageChunk {
			t.Errorf("chunk %d has %d rows, want %d", i, n, pageChunk)
		}
	}
	v, err := ff.State.Generation(context.Background(), 0, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	counts := text(byID(t, doc, "counts"))
	want := fmt.Sprintf("10000 nodes %d applied %d failed %d outstanding %d ineligible %d unassigned",
		v.Totals.Applied, v.Totals.Failed, v.Totals.Outstanding, v.Totals.Ineligible, v.Totals.Unassigned)
	if counts != want {
		t.Errorf("counts %q, want %q", counts, want)
	}
	if v.Totals.Failed == 0 || v.Totals.Outstanding == 0 || v.Totals.Ineligible == 0 || v.Totals.Unassigned == 0 {
		t.Fatalf("the fixture lacks a status: %+v", v.Totals)
	}
	failed := 0
	for name, row := range rows {
		if row[0] == "failed" {
			failed++
			if !strings.Contains(row[3], failedDetail) {
				t.Errorf("%s: %q", name, row[3])
			}
		}
	}
	if failed != v.Totals.Failed {
		t.Errorf("%d failed rows, want %d", failed, v.Totals.Failed)
	}
	if hist := elements(elements(byID(t, doc, "history"), "tbody")[0], "tr"); len(hist) != PageGenerations {
		t.Errorf("%d generations charted, want %d", len(hist), PageGenerations)
	}
	paths := elements(byID(t, doc, "chart"), "path")
	if len(paths) != PageGenerations {
		t.Errorf("%d curves, want %d", len(paths), PageGenerations)
	}
	for _, p := range paths {
		if n := strings.Count(attr(p, "d"), "V"); n > 2000 {
			t.Errorf("a curve of %d points", n)
		}
	}
}

// The page counts, draws and filters every status there is: a status
// added to the rules is added to the page too, or this fails.
func TestPageKnowsEveryStatus(t *testing.T) {
	for st := range statusOrder {
		if !slices.Contains(pageStatuses, st) {
			t.Errorf("the page does not show status %s", st)
		}
		var tot Totals
		tot.add(st)
		if count(tot, st) != 1 || tot.Nodes != 1 {
			t.Errorf("the page does not count status %s", st)
		}
		for _, sel := range []string{"." + string(st) + " i", "." + string(st) + " > td:nth-child(2)::before"} {
			if !strings.Contains(pageCSS, sel) {
				t.Errorf("status %s has no shape: the style sheet has no %s", st, sel)
			}
		}
	}
	if len(pageStatuses) != len(statusOrder) {
		t.Errorf("the page shows %d statuses, the rules have %d", len(pageStatuses), len(statusOrder))
	}
}

// The page is made from the same view as the JSON document: every node
// the document lists is a row of the page with the same status, last
// applied generation and failed lines, and the counts are the same.
func TestPageShowsWhatTheJSONSays(t *testing.T) {
	f := goldenFixture(t)
	s := f.load(false)
	made := t0.Add(72 * time.Hour)
	for _, sel := range []Selection{{}, {All: true}, {Names: []string{"web-2", "build-1", "old-host"}}} {
		v := f.view(s, 0, sel)
		var doc jsonDoc
		if err := json.Unmarshal([]byte(jsonOf(t, v)), &doc); err != nil {
			t.Fatal(err)
		}
		_, page := renderPage(t, s, 0, sel, made)
		rows := nodeRows(t, page)
		if len(rows) != len(doc.Nodes) {
			t.Errorf("%+v: %d rows, %d nodes in the JSON", sel, len(rows), len(doc.Nodes))
		}
		for _, n := range doc.Nodes {
			row := rows[n.Name]
			if row == nil {
				t.Errorf("%+v: %s is in the JSON, not on the page", sel, n.Name)
				continue
			}
			applied := "none"
			if n.LastApplied != nil {
				applied = fmt.Sprint(*n.LastApplied)
			}
			if row[0] != string(n.Status) || row[1] != applied {
				t.Errorf("%+v: %s: page %q, JSON %s, last applied %s", sel, n.Name, row, n.Status, applied)
			}
			for _, l := range n.FailedLines {
				if !strings.Contains(row[3], l.ID+": "+l.Detail) {
					t.Errorf("%+v: %s: the page does not show failed line %s: %s", sel, n.Name, l.ID, l.Detail)
				}
			}
		}
		if got, want := text(elements(page, "h1")[0]), "Generation 2 for wave "+doc.Wave+" (the newest)"; got != want {
			t.Errorf("%+v: heading %q, want %q", sel, got, want)
		}
		// Reports not counted are named as the JSON names them: flagged
		// always, refused with --all.
		head := text(elements(page, "header")[0])
		listed := doc.Flagged
		if sel.All {
			listed = append(listed, doc.Refused.Reports...)
		}
		for _, o := range listed {
			if !strings.Contains(head, o.Object) || !strings.Contains(head, o.Reason) {
				t.Errorf("%+v: the page does not name %s report %s: %s", sel, o.Kind, o.Object, o.Reason)
			}
		}
		if len(sel.Names) == 0 && (len(doc.Flagged) == 0 || sel.All && len(doc.Refused.Reports) == 0) {
			t.Errorf("%+v: the fixture has no flagged or refused report to show", sel)
		}
		if n := doc.Refused.Revoked + doc.Refused.Unknown + doc.Refused.Unverified; n > 0 && !strings.Contains(head, "Refused and not counted") {
			t.Errorf("%+v: %d refused reports are not counted on the page", sel, n)
		}
		var want []string
		for _, st := range pageStatuses {
			if st == Decommissioned && !sel.All && doc.Totals.Decommissioned == 0 || st == Held && doc.Totals.Held == 0 {
				continue
			}
			want = append(want, fmt.Sprintf("%d %s", count(Totals(doc.Totals), st), st))
		}
		if got, w := text(byID(t, page, "counts")), fmt.Sprintf("%d nodes %s", doc.Totals.Nodes, strings.Join(want, " ")); got != w {
			t.Errorf("%+v: counts %q, JSON %q", sel, got, w)
		}
	}
}

// A generation with no readable manifest, and a spool that holds two
// histories, say so at the top of the page, as report says on stderr.
func TestPageWarnsOfForksAndMissingManifests(t *testing.T) {
	f := newFixture(t)
	id := f.enrol("web-1", t0)
	f.commitAfter(1, t0, &generation.Manifest{Nodes: []generation.ManifestNode{assign(id)}}, nil, "")
	other := &generation.Commit{Generation: 1, Digest: "sha256:" + strings.Repeat("cd", 32)}
	f.commitAfter(2, t0.Add(time.Hour), nil, other, "")
	s := f.load(false)
	if len(s.Forks) != 1 {
		t.Fatalf("forks %+v, want one", s.Forks)
	}
	_, doc := renderPage(t, s, 0, Selection{}, t0.Add(2*time.Hour))
	head := text(elements(doc, "header")[0])
	if !strings.Contains(head, "The manifest of generation 2 could not be read") {
		t.Errorf("the page does not say the manifest is missing: %q", head)
	}
	if !strings.Contains(head, "Fork: "+s.Forks[0].String()) {
		t.Errorf("the page does not name the fork: %q", head)
	}
}
