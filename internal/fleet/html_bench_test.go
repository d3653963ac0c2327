package fleet

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/muster-tool/muster/internal/testutil/chromium"
)

// The page of 10,000 nodes over 50 generations: how long muster takes to
// make it (render), and how long Chromium takes to show it (chromium:
// from asking for the file to the first frame painted after its load
// event, so the whole table is parsed and laid out and the script has
// run). The budget: under 5 MB, shown in under 1 s on 2 cores.
//
//	go test -run '^$' -bench ReportPage -benchtime 10x ./internal/fleet
func BenchmarkReportPage(b *testing.B) {
	ff := newFactFleet(b, 10000, 50)
	ctx := context.Background()
	render := func() []byte {
		v, err := ff.State.Generation(ctx, 0, Selection{})
		if err != nil {
			b.Fatal(err)
		}
		rs, err := ff.State.Rollouts(ctx, v.Generation, PageGenerations, Selection{})
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteHTML(&buf, Page{View: v, Rollouts: rs, Made: ff.Made, Ago: testAgo}); err != nil {
			b.Fatal(err)
		}
		return buf.Bytes()
	}
	page := render()
	if len(page) >= 5<<20 {
		b.Errorf("the page is %d bytes, want under 5 MB", len(page))
	}

	b.Run("render", func(b *testing.B) {
		for b.Loop() {
			render()
		}
		b.ReportMetric(float64(len(page)), "page-bytes")
	})

	b.Run("chromium", func(b *testing.B) {
		path := writePage(b, string(page))
		br := chromium.Start(b, 1280, 1000)
		var urls []string
		var loadMS float64
		i := 0
		for b.Loop() {
			// A query makes each load a new navigation of the file.
			i++
			url := fmt.Sprintf("%s?%d", chromium.FileURL(path), i)
			urls = append(urls, url)
			br.Do(chromedp.Navigate(url))
			loadMS += chromium.Eval[float64](br,
				`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))`)
		}
		b.ReportMetric(float64(len(page)), "page-bytes")
		b.ReportMetric(loadMS/float64(i), "ms-to-frame")
		if got := chromium.Eval[int](br, `document.querySelectorAll("#node-table tbody tr").length`); got != 10000 {
			b.Errorf("%d rows shown, want 10000", got)
		}
		br.OnlyRequested(urls...)
	})
}
