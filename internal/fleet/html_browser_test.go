package fleet

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"golang.org/x/net/html"

	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/testutil/chromium"
)

// browserFixture is a small mesh in every status over three generations,
// with real reports: eight web nodes that apply each generation at their
// own pace, two that failed the newest (one with markup in its reason,
// one with a long reason), a laptop that is outstanding, an ineligible
// build host and an unassigned spare. The page is made two hours after
// the newest declare.
func browserFixture(t *testing.T) (*State, time.Time) {
	f := newFixture(t)
	var web []*enrol.Identity
	for i := 1; i <= 8; i++ {
		web = append(web, f.enrol(fmt.Sprintf("web-%02d", i), t0))
	}
	db, cache, laptop := f.enrol("db-1", t0), f.enrol("cache-1", t0), f.enrol("laptop", t0)
	build, spare := f.enrol("build-1", t0), f.enrol("spare", t0)
	f.brief(build, 1, t0.Add(5*time.Minute), "free-root")
	f.brief(spare, 1, t0.Add(5*time.Minute))
	f.brief(laptop, 1, t0.Add(6*time.Minute))
	assigned := append(append([]*enrol.Identity(nil), web...), db, cache, laptop)
	var declared time.Time
	var prev *generation.Commit
	for g := uint64(1); g <= 3; g++ {
		man := &generation.Manifest{Ineligible: []string{"build-1"}, Unassigned: []string{"spare"}}
		for _, id := range assigned {
			man.Nodes = append(man.Nodes, assign(id))
		}
		declared = t0.Add(time.Duration(g) * 24 * time.Hour)
		prev = f.commitAfter(g, declared, man, prev, "")
		for i, id := range web {
			// The newest generation goes slower than the ones before.
			f.reportOK(id, g, 1, declared.Add(time.Duration(i+1)*time.Duration(g*g)*time.Minute))
		}
		if g < 3 {
			f.reportOK(db, g, 1, declared.Add(3*time.Minute))
			f.reportOK(cache, g, 1, declared.Add(4*time.Minute))
		}
	}
	r := f.report(db, 3, declared.Add(20*time.Minute))
	r.Lines = append(r.Lines, outcomeLine("package:postgresql-16", strings.Repeat("dpkg: dependency problems prevent configuration of postgresql-16: ", 12)))
	f.write(db, 3, 1, r)
	r = f.report(cache, 3, declared.Add(25*time.Minute))
	r.Lines = append(r.Lines, outcomeLine("service:redis", `<script>alert("pwned")</script> exited 1 & restarted`))
	f.write(cache, 3, 1, r)
	return f.load(false), declared.Add(2 * time.Hour)
}

// visibleRows is a script that lists the names of the node table's rows a
// person sees, in order.
const visibleRows = `[...document.querySelectorAll("#node-table tbody tr")].filter(r => r.checkVisibility()).map(r => r.cells[0].textContent)`

// The page in a real browser: it loads from the file with nothing else,
// shows the counts and a failed node's reason, and its filter, search
// and sort show what they say. A screenshot of it is kept with the test's
// artifacts (go test -artifacts -outputdir DIR).
func TestPageInChromium(t *testing.T) {
	s, made := browserFixture(t)
	page, _ := renderPage(t, s, 0, Selection{}, made)
	path := writePage(t, page)
	url := chromium.FileURL(path)
	b := chromium.Start(t, 1280, 1000)
	b.Open(url)

	if got := chromium.Eval[string](b, `document.getElementById("counts").innerText.replace(/\s+/g, " ").trim()`); got != "13 nodes 8 applied 2 failed 1 outstanding 1 ineligible 1 unassigned" {
		t.Errorf("counts %q", got)
	}
	if got := chromium.Eval[string](b, `document.querySelector("h1").textContent`); got != "Generation 3 (the newest)" {
		t.Errorf("heading %q", got)
	}

	// A failed node's reason is in the row, as text, closed until its
	// summary is clicked.
	const cacheLine = `document.querySelector("#node-table tr.failed:nth-child(2) details li")`
	if got := chromium.Eval[string](b, `document.querySelector("#node-table tbody tr:nth-child(2)").cells[0].textContent`); got != "cache-1" {
		t.Fatalf("the second row is %q, want cache-1", got)
	}
	if got := chromium.Eval[string](b, cacheLine+`.textContent`); got != `service:redis: <script>alert("pwned")</script> exited 1 & restarted` {
		t.Errorf("cache-1's failed line %q", got)
	}
	if chromium.Eval[bool](b, cacheLine+`.checkVisibility()`) {
		t.Error("the failed lines show before their summary is clicked")
	}
	b.Do(chromedp.Click(chromedp.CSS(`#node-table tr.failed:nth-child(2) summary`)))
	if !chromium.Eval[bool](b, cacheLine+`.checkVisibility()`) {
		t.Error("a click on the summary does not show the failed lines")
	}

	// The filter and the search, alone and together.
	all := []string{"build-1", "cache-1", "db-1", "laptop", "spare", "web-01", "web-02", "web-03", "web-04", "web-05", "web-06", "web-07", "web-08"}
	for _, step := range []struct {
		do    chromedp.Action[chromedp.Void]
		rows  []string
		shown string
	}{
		{nil, all, "13 of 13 nodes shown"},
		{chromedp.Click(chromedp.CSS(`input[name=status][value=failed]`)), []string{"cache-1", "db-1"}, "2 of 13 nodes shown"},
		{chromedp.Click(chromedp.CSS(`input[name=status][value=outstanding]`)), []string{"laptop"}, "1 of 13 nodes shown"},
		{chromedp.Click(chromedp.CSS(`input[name=status][value=""]`)), all, "13 of 13 nodes shown"},
		{chromedp.SendKeys(chromedp.ID("search"), "WEB-0"), all[5:], "8 of 13 nodes shown"},
		{chromedp.SendKeys(chromedp.ID("search"), "7"), []string{"web-07"}, "1 of 13 nodes shown"},
		{chromedp.Click(chromedp.CSS(`input[name=status][value=failed]`)), nil, "0 of 13 nodes shown"},
		{chromedp.SendKeys(chromedp.ID("search"), strings.Repeat("\b", 8)), []string{"cache-1", "db-1"}, "2 of 13 nodes shown"},
		{chromedp.SendKeys(chromedp.ID("search"), "db"), []string{"db-1"}, "1 of 13 nodes shown"},
		{chromedp.Click(chromedp.CSS(`input[name=status][value=""]`)), []string{"db-1"}, "1 of 13 nodes shown"},
		{chromedp.SendKeys(chromedp.ID("search"), strings.Repeat("\b", 8)), all, "13 of 13 nodes shown"},
	} {
		if step.do != nil {
			b.Do(step.do)
		}
		got := chromium.Eval[[]string](b, visibleRows)
		if !slices.Equal(got, step.rows) {
			t.Errorf("rows shown %q, want %q", got, step.rows)
		}
		if got := chromium.Eval[string](b, `document.getElementById("shown").textContent`); got != step.shown {
			t.Errorf("the count shown says %q, want %q", got, step.shown)
		}
	}
	// Sorting by each column: by status (what needs attention first), by
	// last contact (longest silent first, then the other way), by name, by
	// last applied generation, by failed lines; rows that tie keep the
	// order they had.
	for _, step := range []struct {
		column string
		first  []string
	}{
		{"Status", []string{"cache-1", "db-1", "laptop", "build-1", "spare", "web-01"}},
		{"Last contact", []string{"build-1", "spare", "laptop", "web-01", "web-02", "db-1", "cache-1", "web-03"}},
		{"Last contact", []string{"web-08", "web-07"}},
		{"Node", all[:3]},
		{"Last applied", []string{"build-1", "laptop", "spare", "cache-1", "db-1", "web-01"}},
		{"Failed lines and notes", []string{"laptop", "web-01", "web-02", "web-03", "web-04", "web-05", "web-06", "web-07", "web-08",
			"build-1", "db-1", "cache-1", "spare"}},
	} {
		b.Do(chromedp.Click(chromedp.Search(fmt.Sprintf(`//th/button[normalize-space()=%q]`, step.column))))
		got := chromium.Eval[[]string](b, visibleRows)
		if len(got) != len(all) || !slices.Equal(got[:len(step.first)], step.first) {
			t.Errorf("sorted by %s: %q, want it to start %q", step.column, got, step.first)
		}
	}

	b.Screenshot("report-page.png")
	b.OnlyRequested(url)
}

// With scripts off the page is still whole: every row, the counts and the
// chart; only the controls that need a script are not shown. Printed, the
// failed lines show without a click and the controls do not.
func TestPageInChromiumWithoutScriptsAndPrinted(t *testing.T) {
	s, made := browserFixture(t)
	page, _ := renderPage(t, s, 0, Selection{}, made)
	path := writePage(t, page)
	url := chromium.FileURL(path)
	b := chromium.Start(t, 1280, 1000)
	if _, err := chromedp.Call(b.Context(), emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	b.Do(chromedp.Navigate(url))
	if got := chromium.Eval[[]string](b, visibleRows); len(got) != 13 {
		t.Errorf("rows shown with scripts off: %q, want all 13", got)
	}
	if chromium.Eval[bool](b, `document.getElementById("controls").checkVisibility()`) {
		t.Error("the filter and search show with scripts off, where they cannot work")
	}
	if got := chromium.Eval[string](b, `document.getElementById("shown").textContent`); got != "" {
		t.Errorf("the page's script ran with scripts off: %q", got)
	}
	if !chromium.Eval[bool](b, `[...document.querySelectorAll("noscript")].length === 1`) {
		t.Error("the page does not say what scripts would add")
	}
	if got := chromium.Eval[int](b, `document.querySelectorAll("#chart path").length`); got != 3 {
		t.Errorf("%d curves with scripts off, want 3", got)
	}

	if _, err := chromedp.Call(b.Context(), emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Media: "print"}); err != nil {
		t.Fatal(err)
	}
	if !chromium.Eval[bool](b, `[...document.querySelectorAll("#node-table details li")].every(li => li.checkVisibility())`) {
		t.Error("printed, the failed lines do not show")
	}
	if chromium.Eval[bool](b, `document.getElementById("controls").checkVisibility()`) {
		t.Error("printed, the controls show")
	}
	b.PrintToPDF("report-page.pdf")
	b.OnlyRequested(url)
}

// Ten thousand nodes in the browser: the rows come in chunks the browser
// lays out only in view; the filter, the search and the sort move the
// rows shown to the first chunks, in order, and hide the chunks left
// empty.
func TestPage10000NodesInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a fleet of 10,000 nodes")
	}
	_, page := bigFleetPage(t)
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for name, row := range nodeRows(t, doc) {
		if row[0] == "failed" {
			failed = append(failed, name)
		}
	}
	slices.Sort(failed)
	path := writePage(t, page)
	url := chromium.FileURL(path)
	b := chromium.Start(t, 1280, 1000)
	b.Open(url)

	const shownRows = `[...document.querySelectorAll("#node-table tbody tr")].filter(r => r.checkVisibility()).map(r => r.cells[0].textContent)`
	const shownChunks = `[...document.querySelectorAll("#node-table tbody")].filter(c => !c.hidden).length`
	if got := chromium.Eval[int](b, `document.querySelectorAll("#node-table tbody tr").length`); got != 10000 {
		t.Fatalf("%d rows, want 10000", got)
	}
	b.Do(chromedp.Click(chromedp.CSS(`input[name=status][value=failed]`)))
	if got := chromium.Eval[[]string](b, shownRows); !slices.Equal(got, failed) {
		t.Errorf("failed rows shown: %d, want the %d failed nodes", len(got), len(failed))
	}
	if got := chromium.Eval[bool](b, `[...document.querySelector("#node-table tbody").rows].slice(0, `+fmt.Sprint(len(failed))+`).every(r => r.className === "failed")`); !got {
		t.Error("the failed rows are not the first of the first chunk")
	}
	if got := chromium.Eval[int](b, shownChunks); got != 1 {
		t.Errorf("%d chunks shown for %d rows, want 1", got, len(failed))
	}
	b.Do(chromedp.Click(chromedp.CSS(`input[name=status][value=""]`)), chromedp.SendKeys(chromedp.ID("search"), "node-0999"))
	want := []string{"node-09990", "node-09991", "node-09992", "node-09993", "node-09994", "node-09995", "node-09996", "node-09997", "node-09998", "node-09999"}
	if got := chromium.Eval[[]string](b, shownRows); !slices.Equal(got, want) {
		t.Errorf("search node-0999: %q, want %q", got, want)
	}
	b.Do(chromedp.SendKeys(chromedp.ID("search"), strings.Repeat("\b", 9)))
	if got := chromium.Eval[int](b, shownChunks); got != 10000/pageChunk {
		t.Errorf("%d chunks shown for every row, want %d", got, 10000/pageChunk)
	}
	// Sorted by status, the failed nodes come first, then the outstanding.
	b.Do(chromedp.Click(chromedp.Search(`//th/button[normalize-space()="Status"]`)))
	got := chromium.Eval[[]string](b, shownRows)
	if len(got) != 10000 || !slices.Equal(got[:len(failed)], failed) {
		t.Errorf("sorted by status: %d rows starting %q, want the failed nodes first", len(got), got[:min(3, len(got))])
	}
	b.OnlyRequested(url)
}
