package chromium

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
)

// The guard the page tests rely on: a request a page makes outside
// itself, and an error it raises, are seen. The server is on loopback.
func TestRequestsAndErrorsAreSeen(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "image/gif")
	}))
	defer srv.Close()
	page := filepath.Join(t.TempDir(), "page.html")
	html := `<!DOCTYPE html><title>t</title><img src="` + srv.URL + `/pixel.gif"><script>throw new Error("boom")</script>`
	if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	b := Start(t, 800, 600)
	b.Do(chromedp.Navigate(FileURL(page)))
	reqs := b.Requests()
	if !slices.Contains(reqs, FileURL(page)) || !slices.Contains(reqs, srv.URL+"/pixel.gif") {
		t.Errorf("requests %q, want the page and its image", reqs)
	}
	if served.Load() == 0 {
		t.Error("the image was not requested")
	}
	if errs := b.Errors(); !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, "boom") }) {
		t.Errorf("errors %q, want the exception", errs)
	}
	if got := Eval[string](b, `document.title`); got != "t" {
		t.Errorf("title %q", got)
	}
}

// Open returns once the browser has drawn the page: the page's own
// animation frame, asked for at its load event, has come. Navigate alone
// returns at the load event, most often before any frame; five pages in a
// row make it all but certain that a wait left out is seen.
func TestOpenWaitsForAFrame(t *testing.T) {
	page := filepath.Join(t.TempDir(), "page.html")
	html := `<!DOCTYPE html><title>t</title><p>drawn</p><script>var frames = 0; addEventListener("load", function () { requestAnimationFrame(function () { frames++; }); });</script>`
	if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	b := Start(t, 800, 600)
	for i := range 5 {
		b.Open(fmt.Sprintf("%s?%d", FileURL(page), i))
		if got := Eval[int](b, `frames`); got == 0 {
			t.Fatalf("load %d: no frame drawn when Open returned", i+1)
		}
	}
}
