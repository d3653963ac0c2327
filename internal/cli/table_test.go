package cli

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// A long reason is shortened in the middle at spaces, its long path to
// the path's ends; a word is cut only when it alone is too long.
func TestShortenMiddle(t *testing.T) {
	reason := "package:muster-demo-tool: install muster-demo-tool=9.9-1 under /tmp/muster-demo.hOJRi6/web-1/root: apt-get exited with status 100: E: Unable to locate package muster-demo-tool (read back: not installed)"
	for _, tc := range []struct {
		s     string
		width int
		want  string
	}{
		{"fits as it is", 20, "fits as it is"},
		{"free-root: 70267 MiB free on /tmp/muster-demo.hOJRi6/web-2/root, below the threshold of 999999999 MiB", 90,
			"free-root: 70267 MiB free on /tmp/…/web-2/root, below the threshold of 999999999 MiB"},
		{"free-root: 70267 MiB free on /tmp/muster-demo.hOJRi6/web-2/root, below the threshold of 999999999 MiB", 80,
			"free-root: 70267 MiB free on /tmp/…/web-2/root, … the threshold of 999999999 MiB"},
		{reason, 62, "package:muster-demo-tool: install … (read back: not installed)"},
		{reason, 60, "package:muster-demo-tool: install … back: not installed)"},
		{reason, 40, "package:muster-demo-tool: … installed)"},
		{"ab6d1cba2649975a5af36f7d7f435ff8ab6d1cba2649975a", 21, "ab6d1cba26…ba2649975a"},
	} {
		got := shortenMiddle(tc.s, tc.width, "…")
		if got != tc.want {
			t.Errorf("shortenMiddle(%q, %d) = %q, want %q", tc.s, tc.width, got, tc.want)
		}
		if n := utf8.RuneCountInString(got); n > tc.width {
			t.Errorf("shortenMiddle(%q, %d) is %d wide", tc.s, tc.width, n)
		}
	}
}

// No word of a shortened text is cut: each word left is a word of the
// text, or the ellipsis, or a path shortened to its ends; at any width.
func TestShortenMiddleKeepsWordsWhole(t *testing.T) {
	s := "free-root: 70267 MiB free on /var/lib/muster/state/outbox/pending, below the threshold of 999999999 MiB (read back: not installed)"
	words := map[string]bool{}
	for _, w := range strings.Fields(s) {
		words[w] = true
	}
	for width := 16; width <= len(s)+1; width++ {
		got := shortenMiddle(s, width, "...")
		if len(got) > width {
			t.Errorf("width %d: %q is %d wide", width, got, len(got))
		}
		for _, w := range strings.Fields(got) {
			if !words[w] && w != "..." && w != "/var/.../outbox/pending," {
				t.Errorf("width %d: %q cuts a word: %q", width, got, w)
			}
		}
	}
}

// Every line of a table fits its width, has one node, and each column
// starts where its title does; a reason with a line break stays on one
// line; no line ends in spaces.
func TestFitTable(t *testing.T) {
	long := "free-root: 77565 MiB free on /tmp/a/very/long/path/that/goes/on/and/on/web-2/root,\nbelow the threshold of 999999999 MiB"
	rows := [][]string{
		{"web-1", "8cc08f843f3b", "env=prod", "eligible"},
		{"web-2", "8eb0bbf48cb2", "env=prod,role=web,site=ams,rack=r12,owner=platform-team", "ineligible: " + long},
		{"laptop-with-a-long-name", "", "", ""},
	}
	cols := []column{{title: "NODE"}, {title: "IDENTITY"}, {title: "LABELS", shorten: true}, {title: "ELIGIBILITY", shorten: true}}
	for _, width := range []int{60, 80, 132, 300} {
		var buf bytes.Buffer
		if err := fitTable(&buf, width, "…", cols, rows); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		if len(lines) != 1+len(rows) {
			t.Fatalf("width %d: %d lines for %d rows:\n%s", width, len(lines), len(rows), buf.String())
		}
		starts := []int{0}
		for _, title := range []string{"IDENTITY", "LABELS", "ELIGIBILITY"} {
			starts = append(starts, strings.Index(lines[0], title))
		}
		for i, l := range lines {
			if n := utf8.RuneCountInString(l); n > width {
				t.Errorf("width %d: line %d is %d wide: %q", width, i, n, l)
			}
			if strings.HasSuffix(l, " ") {
				t.Errorf("width %d: line %d ends in spaces: %q", width, i, l)
			}
			if i == 0 {
				continue
			}
			for j, s := range starts {
				cell := rows[i-1][j]
				r := []rune(l)
				if cell != "" && (len(r) <= s || r[s] == ' ' || (s > 0 && r[s-1] != ' ')) {
					t.Errorf("width %d: line %d: column %d does not start at %d: %q", width, i, j, s, l)
				}
			}
		}
		if width == 300 && !strings.Contains(buf.String(), "/tmp/a/very/long/path/that/goes/on/and/on/web-2/root, below") {
			t.Errorf("width 300: a text that fits was shortened:\n%s", buf.String())
		}
	}
}

// On a terminal the table takes the terminal's width; anywhere else 80
// columns. The terminal here is a real pseudo-terminal 132 columns wide.
func TestTableFitsTheTerminal(t *testing.T) {
	ptmx, pts := openPTY(t, 132)
	if got := screenWidth(pts); got != 132 {
		t.Errorf("on a 132-column terminal: width %d", got)
	}
	if got := screenWidth(&asciiWriter{w: pts}); got != 132 {
		t.Errorf("on a 132-column terminal under LANG=C: width %d", got)
	}
	if got := screenWidth(&bytes.Buffer{}); got != defaultWidth {
		t.Errorf("not a terminal: width %d, want %d", got, defaultWidth)
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := screenWidth(f); got != defaultWidth {
		t.Errorf("a file: width %d, want %d", got, defaultWidth)
	}
	_ = ptmx
}

// openPTY opens a pseudo-terminal cols wide and returns its two ends.
func openPTY(t *testing.T, cols int) (ptmx, pts *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: uint16(cols)}); err != nil {
		t.Fatal(err)
	}
	return ptmx, pts
}

// The relative time of last contact is one short phrase.
func TestAgo(t *testing.T) {
	for d, want := range map[time.Duration]string{-time.Minute: "in the future", 30 * time.Second: "just now",
		12 * time.Minute: "12 min ago", 5 * time.Hour: "5 h ago", 47 * time.Hour: "47 h ago", 80 * time.Hour: "3 d ago"} {
		if got := ago(d); got != want {
			t.Errorf("ago(%s) = %q, want %q", d, got, want)
		}
	}
}

// The plain lists (enrol list, brief list) align their columns too.
func TestAlignRows(t *testing.T) {
	got := alignRows([][]string{{"web-1", "8cc08f843f3b", "eligible", "env=prod"}, {"laptop-07", "-", "decommissioned", ""}})
	want := []string{"web-1      8cc08f843f3b  eligible        env=prod", "laptop-07  -             decommissioned"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("alignRows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
