package fleet

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"

	"github.com/muster-tool/muster/internal/testutil/chromium"
)

// The page of 10,000 nodes over 50 generations: how long muster takes to
// make it (render), and how long Chromium takes to show it (chromium: the
// time per op is from asking for the file to the first frame painted
// after its load event, so the whole page is parsed, the rows in view are
// laid out and the script has run). On a busy machine that time is mostly
// waiting for a CPU, so the CPU time is reported too: main-thread-ms, of
// the page's main thread, and browser-cpu-ms, of every process of the
// browser, which is what a load takes of a machine the browser has to
// itself.
// The budget: under 5 MB, shown in under 1 s on 2 cores.
//
//	go test -run '^$' -bench ReportPage -benchtime 10x ./internal/fleet
func BenchmarkReportPage(b *testing.B) {
	ff, _ := bigFleetPage(b)
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
		if _, err := chromedp.Call(br.Context(), performance.Enable, performance.EnableParams{TimeDomain: performance.EnableTimeDomainThreadTicks}); err != nil {
			b.Fatal(err)
		}
		var urls []string
		var cpu time.Duration
		i := 0
		browserCPU := br.CPUTime()
		for b.Loop() {
			// A query makes each load a new navigation of the file.
			i++
			url := fmt.Sprintf("%s?%d", chromium.FileURL(path), i)
			urls = append(urls, url)
			br.Open(url)
			cpu += mainThreadTime(b, br)
		}
		b.ReportMetric(float64(len(page)), "page-bytes")
		b.ReportMetric(float64(cpu.Milliseconds())/float64(i), "main-thread-ms")
		b.ReportMetric(float64((br.CPUTime()-browserCPU).Milliseconds())/float64(i), "browser-cpu-ms")
		if got := chromium.Eval[int](br, `document.querySelectorAll("#node-table tbody tr").length`); got != 10000 {
			b.Errorf("%d rows shown, want 10000", got)
		}
		br.OnlyRequested(urls...)
	})
}

// mainThreadTime is the CPU time the page's main thread spent since the
// page was loaded.
func mainThreadTime(b *testing.B, br *chromium.Browser) time.Duration {
	m, err := chromedp.Call(br.Context(), performance.GetMetrics, cdp.Empty{})
	if err != nil {
		b.Fatal(err)
	}
	for _, x := range m.Metrics {
		if x.Name == "ThreadTime" {
			return time.Duration(x.Value * float64(time.Second))
		}
	}
	b.Fatal("no ThreadTime among the page's metrics")
	return 0
}
