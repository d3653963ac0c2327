package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/declare"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/fleet"
	"github.com/muster-tool/muster/internal/outcome"
)

// A host writes its reports' and briefings' lines and its facts; the mesh
// only knows they are the host's. A tampered host's text, shown to people,
// can neither drive their terminal (an escape sequence that sets the
// window title, an 8-bit CSI), nor start a line of its own that reads as
// another node's, nor reverse the text beside it: each such character is
// shown as its escape, and the node keeps its one line.
func TestHostTextCannotSteerTheTerminal(t *testing.T) {
	const (
		forged  = "\napplied  db-1  reported 1 minute ago"
		hostile = "disk full\x1b]0;owned\x07\x1b[2K\r\u009b31m\u202egnp.exe\xff" + forged
	)
	line := outcome.Line{ID: "file:/etc/app\x1b[8m.conf", Status: outcome.Failed, Detail: hostile}
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	view := &fleet.View{Generation: 3, Manifest: true, Nodes: []fleet.NodeStatus{
		{Name: "web-1", Status: fleet.Failed, FailedLines: []outcome.Line{line}, LastContact: now.Add(-time.Minute)},
		{Name: "web-2", Status: fleet.Ineligible, FailedLines: []outcome.Line{line}},
	}, Refused: []fleet.Object{{Name: "report/00/3-1", Node: "web-1", Kind: fleet.RefusedUnverified, Reason: "bad line " + hostile}}}
	b := &brief.Briefing{Node: "web-1", Time: now, Lines: []outcome.Line{line},
		Facts: &brief.Facts{Hostname: "web-1\x1b]0;owned\x07", OSID: "debian\n" + forged}}
	rows := []briefListRow{{Name: "web-1", Outcome: "ineligible", FailedLines: []outcome.Line{line}}}
	nodes := []listNode{{Name: "web-1", Eligibility: "ineligible", FailedLines: []outcome.Line{line}}}
	for name, print := range map[string]func(*bytes.Buffer) error{
		"report":              func(w *bytes.Buffer) error { reportSummary(w, view, true, false, now); return nil },
		"report --table":      func(w *bytes.Buffer) error { return reportTable(w, view, true, false, now) },
		"report NODE --table": func(w *bytes.Buffer) error { return reportTable(w, view, true, true, now) },
		"brief show":          func(w *bytes.Buffer) error { return printBriefing(w, b, textFormat) },
		"brief list":          func(w *bytes.Buffer) error { return printBriefList(w, rows, textFormat) },
		"brief list --table":  func(w *bytes.Buffer) error { return printBriefList(w, rows, tableFormat) },
		"enrol list":          func(w *bytes.Buffer) error { return printNodes(w, nodes, false) },
		"enrol list --table":  func(w *bytes.Buffer) error { return printNodes(w, nodes, true) },
		"declare (ineligible)": func(w *bytes.Buffer) error {
			printDeclare(w, &declare.Result{Ineligible: []declare.Ineligible{{Name: "web-2", Failed: []outcome.Line{line}}}})
			return nil
		},
		"report --wait (failed)": func(w *bytes.Buffer) error {
			_, err := w.WriteString(linesText([]outcome.Line{line}, "; ") + "\n")
			return err
		},
	} {
		var w bytes.Buffer
		if err := print(&w); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out := w.String()
		if i := strings.IndexFunc(out, func(r rune) bool {
			return r != '\n' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r >= 0x202a && r <= 0x202e)
		}); i >= 0 {
			t.Errorf("%s: a host's control characters reach the terminal (at %d):\n%q", name, i, out)
		}
		if strings.Contains(out, "\xff") {
			t.Errorf("%s: a byte that is not UTF-8 reaches the terminal:\n%q", name, out)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "applied") {
				t.Errorf("%s: a host's text starts a line of its own: %q\n%s", name, l, out)
			}
		}
	}
}

// Printable leaves ordinary text alone, and writes the rest as the escapes
// a Go string literal would use.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "",
		"exited with status 2":     "exited with status 2",
		"ünïcode, 日本語 and emoji 🙂": "ünïcode, 日本語 and emoji 🙂",
		"two\nlines\tand a tab":    `two\nlines\tand a tab`,
		"\x1b]0;title\x07":         `\x1b]0;title\a`,
		"\u009b31m":                `\u009b31m`,
		"\u202eexe.txt":            `\u202eexe.txt`,
		"bad \xff byte":            `bad \xff byte`,
	} {
		if got := outcome.Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
	// A line of a file's text shown whole keeps its tabs.
	if got, want := outcome.PrintableLine("key\tvalue \x1b[31mred\r"), `key`+"\t"+`value \x1b[31mred\r`; got != want {
		t.Errorf("PrintableLine = %q, want %q", got, want)
	}
}

// An error, its hint and a warning are one line each whatever they quote:
// a store's answer, a path on the host, a host's words.
func TestMessagesQuoteAsOneLine(t *testing.T) {
	var w bytes.Buffer
	store := errors.New("api error AccessDenied: \x1b]0;owned\x07denied\nmuster: hint: run rm -rf /")
	code := finish(&w, fault.WithHint(fault.New(fault.Temporary, store), "check /srv/x\x1b[2J"))
	env := &Env{Stdio: Stdio{Err: &w}}
	env.Warnf("briefing of %s: %s", "web-1", "bad\r\nmuster: error: forged")
	env.Warn([]string{"\u202ereversed"})
	env.Errorf("conflict %s: %s", "report/00/1-1", "sizes differ\x1b[1A")
	env.Hintf("%s", "line one\nline two")
	want := "muster: error: api error AccessDenied: \\x1b]0;owned\\adenied\\nmuster: hint: run rm -rf /\n" +
		"muster: hint: check /srv/x\\x1b[2J\n" +
		"muster: warning: briefing of web-1: bad\\r\\nmuster: error: forged\n" +
		"muster: warning: \\u202ereversed\n" +
		"muster: error: conflict report/00/1-1: sizes differ\\x1b[1A\n" +
		"muster: hint: line one\\nline two\n"
	if w.String() != want || code != ExitTemporary {
		t.Errorf("got status %d and\n%s\nwant status %d and\n%s", code, w.String(), ExitTemporary, want)
	}
}
