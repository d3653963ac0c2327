package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/fleet"
	"github.com/muster-tool/muster/internal/outcome"
)

// waitViews are three looks at a generation: nothing applied yet, then
// web-1 applied and web-2 failed, then nothing new.
func waitViews() []*fleet.View {
	view := func(a, b fleet.Status) *fleet.View {
		v := &fleet.View{Generation: 7, Nodes: []fleet.NodeStatus{{Name: "web-1", Status: a}, {Name: "web-2", Status: b}, {Name: "web-3", Status: fleet.Outstanding}}}
		for _, n := range v.Nodes {
			switch n.Status {
			case fleet.Applied:
				v.Totals.Applied++
			case fleet.Failed:
				v.Totals.Failed++
			default:
				v.Totals.Outstanding++
			}
		}
		return v
	}
	second := view(fleet.Applied, fleet.Failed)
	second.Nodes[1].FailedLines = []outcome.Line{{ID: "file:/etc/motd", Status: outcome.Failed, Detail: "is a directory"}}
	return []*fleet.View{view(fleet.Outstanding, fleet.Outstanding), second, view(fleet.Applied, fleet.Failed)}
}

// TestWaitProgressInALog: not on a terminal, a wait writes a line when it
// starts and one line per node that changes, and nothing when nothing
// changed.
func TestWaitProgressInALog(t *testing.T) {
	var b bytes.Buffer
	pr := newProgress(&b, false)
	target, _ := fleet.ParseTarget("applied=2")
	var prev *fleet.View
	for _, v := range waitViews() {
		pr.show(prev, v, target.Progress(v), "waited 10s")
		prev = v
	}
	pr.clear()
	want := `muster: waiting on generation 7: 0 of 3 applied, 3 outstanding, 0 failed (applied=2 needs 2)
muster: web-1 applied generation 7; 1 of 3 applied, 1 outstanding, 1 failed (applied=2 needs 2)
muster: web-2 failed generation 7 (file:/etc/motd: is a directory); 1 of 3 applied, 1 outstanding, 1 failed (applied=2 needs 2)
`
	if b.String() != want {
		t.Errorf("the log reads\n%s\nwant\n%s", b.String(), want)
	}
}

// TestWaitProgressOnATerminal: on a terminal, a wait keeps one line,
// rewritten in place at each look, and takes it away before the report.
func TestWaitProgressOnATerminal(t *testing.T) {
	var b bytes.Buffer
	pr := newProgress(&b, true)
	target, _ := fleet.ParseTarget("all-applied")
	var prev *fleet.View
	for _, v := range waitViews() {
		pr.show(prev, v, target.Progress(v), "waited 20s of 1m0s")
		prev = v
	}
	out := b.String()
	if strings.Contains(out, "\n") || strings.Count(out, "\r\x1b[K") != 3 {
		t.Errorf("on a terminal: %q, want three rewrites of one line", out)
	}
	if !strings.HasSuffix(out, "\r\x1b[Kmuster: generation 7: 1 of 3 applied, 1 outstanding, 1 failed (all-applied needs 3); waited 20s of 1m0s") {
		t.Errorf("the last look shows %q", out)
	}
	b.Reset()
	pr.clear()
	pr.clear()
	if b.String() != "\r\x1b[K" {
		t.Errorf("clearing the line wrote %q", b.String())
	}
}
