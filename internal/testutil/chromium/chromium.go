// Package chromium runs Debian's headless Chromium for tests that look at
// a page as a person would: it starts the browser with a fresh profile
// and nothing that talks to the network on its own, drives it over the
// DevTools protocol (with chromedp), and records every request the page
// makes and every error it raises, so a test can fail on a page that
// reaches outside itself.
//
// The chromium binary is looked up in PATH (scripts/test-deps.sh installs
// Debian's package). Without it a test fails, saying how to install it,
// unless MUSTER_SKIP_BROWSER=1 is set, in which case it is skipped.
package chromium

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// InstallCommand is how to install the browser the tests use.
const InstallCommand = "apt-get install --no-install-recommends chromium"

// Flags are the command line the browser runs with: headless, and nothing
// that reaches the network by itself (no QUIC, no background fetches,
// component updates or sync), so the only requests are the page's.
var Flags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
}

// Browser is a running Chromium with one tab.
type Browser struct {
	t   testing.TB
	ctx context.Context

	mu       sync.Mutex
	requests []string // URLs, in the order the page asked for them
	errors   []string // exceptions and console errors
}

// Binary returns the path of chromium, failing the test (or skipping it
// when MUSTER_SKIP_BROWSER=1) if it is not installed.
func Binary(t testing.TB) string {
	t.Helper()
	if os.Getenv("MUSTER_SKIP_BROWSER") == "1" {
		t.Skip("MUSTER_SKIP_BROWSER=1: skipping tests that need a browser")
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found in PATH: the page tests need a real browser; install it with\n\t%s\nor set MUSTER_SKIP_BROWSER=1 to skip them", InstallCommand)
	}
	return p
}

// Start starts Chromium with a window of width×height and a fresh profile
// directory, and stops it when the test ends.
func Start(t testing.TB, width, height int) *Browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(Binary(t))}
	for _, f := range Flags {
		opts = append(opts, chromedp.Flag(strings.TrimPrefix(f, "--"), true))
	}
	// The profile and the browser's own temporary files (its singleton
	// lock) go in the test's temporary directory, removed after it.
	dir := t.TempDir()
	opts = append(opts, chromedp.UserDataDir(filepath.Join(dir, "profile")), chromedp.Env("TMPDIR="+dir),
		chromedp.WindowSize(width, height))
	b := &Browser{t: t}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithListener(b.record))
	b.ctx = ctx
	// Stopped before the profile directory is removed (cleanups run last
	// registered first), so the browser is gone when it is.
	t.Cleanup(func() {
		chromedp.Cancel(ctx) // closes the browser, and waits for it
		cancel()
		cancelAlloc()
	})
	// The first call starts the browser, for as long as the context it
	// is given: b.ctx, not one with a timeout.
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, log.Enable, cdp.Empty{})
		return err
	}))
	if err != nil {
		t.Fatalf("chromium: start: %v", err)
	}
	return b
}

func (b *Browser) record(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		b.requests = append(b.requests, ev.Request.URL)
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		b.errors = append(b.errors, fmt.Sprintf("exception at %d:%d: %s", d.LineNumber+1, d.ColumnNumber+1, msg))
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
			b.errors = append(b.errors, fmt.Sprintf("%s %s: %s", ev.Entry.Source, ev.Entry.Level, ev.Entry.Text))
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
			b.errors = append(b.errors, fmt.Sprintf("console.%s", ev.Type))
		}
	}
}

// Do runs actions in the tab, failing the test if one fails or they take
// more than a minute.
func (b *Browser) Do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("chromium: %v", err)
	}
}

// Open loads url in b's tab and waits until the browser has drawn a
// frame of it. Navigate returns at the load event, most often before any
// frame: what a page leaves to its first frames (rows under
// content-visibility: auto) is not settled yet, and on a loaded machine
// a test's first click went nowhere. A person cannot click a page before
// it is shown, and neither should a test. It needs scripts on: with them
// off, use Navigate.
func (b *Browser) Open(url string) {
	b.t.Helper()
	b.Do(chromedp.Navigate(url))
	Eval[bool](b, `new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`)
}

// Run runs one action in b's tab and returns its value, failing the test
// if it fails or takes more than a minute.
func Run[T any](b *Browser, action chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		b.t.Fatalf("chromium: %v", err)
	}
	return v
}

// Eval evaluates the JavaScript expression js in b's page (awaiting it,
// if it is a promise) and returns its value.
func Eval[T any](b *Browser, js string) T {
	b.t.Helper()
	return Run(b, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
}

// Context is the tab's context, for chromedp calls whose errors a test
// handles itself.
func (b *Browser) Context() context.Context { return b.ctx }

// FileURL is the file: URL of path.
func FileURL(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return "file://" + filepath.ToSlash(abs)
}

// Screenshot keeps a picture of the whole page as name (PNG) among the
// test's artifacts: with go test -artifacts -outputdir DIR they stay in
// DIR, next to the test's output, which names the file.
func (b *Browser) Screenshot(name string) {
	b.t.Helper()
	b.keep(name, Run(b, chromedp.FullScreenshot(100)))
}

// PrintToPDF keeps the page as printed on A4 as name (PDF) among the
// test's artifacts, as Screenshot does.
func (b *Browser) PrintToPDF(name string) {
	b.t.Helper()
	b.keep(name, Run(b, chromedp.PrintToPDF(chromedp.PDFPaper(chromedp.PaperA4), chromedp.PDFPrintBackground())))
}

func (b *Browser) keep(name string, data []byte) {
	b.t.Helper()
	p := filepath.Join(b.t.ArtifactDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("kept %s", p)
}

// CPUTime is the CPU time (user and system) the browser's processes have
// spent so far: the browser, its renderers and its helpers. A page's cost
// measured this way is what it would take of a machine it had to itself,
// which the wall time on a busy machine is not.
func (b *Browser) CPUTime() time.Duration {
	b.t.Helper()
	c := chromedp.FromContext(b.ctx)
	if c == nil || c.Browser == nil || c.Browser.Process() == nil {
		b.t.Fatal("chromium: no browser process")
	}
	root := c.Browser.Process().Pid
	// Every process's parent and CPU ticks, from /proc/PID/stat.
	parent := map[int]int{}
	ticks := map[int]int64{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone since it was listed
		}
		// The command name is in parentheses and may hold spaces: the
		// fields are counted after its closing one.
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		parent[pid], ticks[pid] = ppid, utime+stime
	}
	var total int64
	for pid, t := range ticks {
		for p := pid; p > 1; p = parent[p] {
			if p == root {
				total += t
				break
			}
		}
	}
	// USER_HZ is 100 on Linux.
	return time.Duration(total) * 10 * time.Millisecond
}

// Requests returns the URLs requested since the last call.
func (b *Browser) Requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.requests
	b.requests = nil
	return r
}

// Errors returns the exceptions and console errors and warnings since
// the last call.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.errors
	b.errors = nil
	return e
}

// OnlyRequested fails the test if the page requested anything but the
// URLs given, or raised an error, since the last call of Requests or
// Errors.
func (b *Browser) OnlyRequested(urls ...string) {
	b.t.Helper()
	allowed := map[string]bool{"about:blank": true}
	for _, u := range urls {
		allowed[u] = true
	}
	for _, u := range b.Requests() {
		if !allowed[u] {
			b.t.Errorf("the page requested %s: it must need nothing outside itself", u)
		}
	}
	for _, e := range b.Errors() {
		b.t.Errorf("the page raised an error: %s", e)
	}
}
