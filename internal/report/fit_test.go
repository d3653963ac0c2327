package report

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/resource"
)

var testDigest = "sha256:" + strings.Repeat("ab", 32)

// worst is what a resource adds to a report at most: a changed line with
// a digest and a detail cut to DetailFloor, and a created ledger entry.
func worst(id string, kind resource.Kind, path, name string) (outcome.Line, ledger.Entry) {
	detail := strings.Repeat("d", DetailFloor-2) // quoted, DetailFloor bytes
	return outcome.Line{ID: id, Status: outcome.Changed, Detail: detail, Digest: testDigest},
		ledger.Entry{ID: id, Kind: kind, Path: path, Name: name, Digest: testDigest, Created: true}
}

func header() *Report {
	return &Report{Version: FormatVersion, Node: "web-01", NodeID: "0123456789abcdef0123456789abcdef", Generation: 7,
		Start: time.Unix(1e9, 0).UTC(), End: time.Unix(1e9+5, 0).UTC(), Muster: "1.0", NewestSeen: 7}
}

// TestResourceCostIsWhatMarshalWrites: ResourceCost is exactly what the
// worst case of a resource adds to Marshal's output, strings that need
// escaping included, so declare's budget and the report cannot drift.
func TestResourceCostIsWhatMarshalWrites(t *testing.T) {
	for _, c := range []struct {
		kind       resource.Kind
		path, name string
	}{
		{resource.File, "/etc/motd", ""},
		{resource.Directory, "/srv/\"quoted\"\\dir\twith\x7fcontrol é", ""},
		{resource.Package, "", "nginx"},
		{resource.Service, "", "app@\x01.service"},
	} {
		s := resource.Spec{Kind: c.kind, Path: c.path, Name: c.name}
		l, e := worst(s.ID(), c.kind, c.path, c.name)
		r := header()
		before := len(Marshal(r))
		r.Lines = append(r.Lines, l)
		r.Ledger = append(r.Ledger, e)
		if got, want := len(Marshal(r))-before, ResourceCost(s.ID(), string(c.kind), c.path, c.name); got != want {
			t.Errorf("%s: Marshal adds %d bytes, ResourceCost says %d", s.ID(), got, want)
		}
	}
}

// budgetFull returns files with paths of about pathLen bytes whose costs
// add up to NodeBudget, or as near as a byte of path (three of cost) goes.
func budgetFull(prefix string, pathLen int) []resource.Spec {
	dir := "/srv/" + prefix + strings.Repeat("p", pathLen)
	cost := func(s resource.Spec) int { return ResourceCost(s.ID(), string(s.Kind), s.Path, s.Name) }
	specs := make([]resource.Spec, NodeBudget/cost(resource.Spec{Kind: resource.File, Path: dir + "/f000000"}))
	total := 0
	for i := range specs {
		specs[i] = resource.Spec{Kind: resource.File, Path: fmt.Sprintf("%s/f%06d", dir, i)}
		total += cost(specs[i])
	}
	last := &specs[len(specs)-1]
	total -= cost(*last)
	last.Path += strings.Repeat("x", (NodeBudget-total-cost(*last))/3)
	if total += cost(*last); total > NodeBudget || total < NodeBudget-2 {
		panic(fmt.Sprintf("budgetFull: %d of %d", total, NodeBudget))
	}
	return specs
}

// TestFitKeepsEveryLineDeclareAccepts: the worst report a declaration
// within the budget can make, all its resources changed with long
// details, is sent whole, its details cut.
func TestFitKeepsEveryLineDeclareAccepts(t *testing.T) {
	long := strings.Repeat("x", 4000)
	r := header()
	r.Notes = []string{"ledger rebuilt from the mesh's recovery copy (3 resources, reported by this identity)"}
	for _, s := range budgetFull("now", 3000) {
		l, e := worst(s.ID(), s.Kind, s.Path, s.Name)
		l.Detail = long
		r.Lines = append(r.Lines, l)
		r.Ledger = append(r.Ledger, e)
	}
	r.Lines = append(r.Lines, outcome.Line{ID: "muster:repository", Status: outcome.Failed, Detail: long})
	if len(Marshal(r)) <= MaxSize {
		t.Fatal("the test report fits as it is: it tests nothing")
	}
	p, sent, err := Fit(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) > MaxSize || string(p) != string(Marshal(sent)) {
		t.Fatalf("payload of %d bytes, cap %d", len(p), MaxSize)
	}
	if len(sent.Lines) != len(r.Lines) || len(sent.Ledger) != len(r.Ledger) {
		t.Fatalf("sent %d lines and %d ledger entries of %d and %d", len(sent.Lines), len(sent.Ledger), len(r.Lines), len(r.Ledger))
	}
	for i, l := range sent.Lines {
		if l.ID != r.Lines[i].ID || l.Status != r.Lines[i].Status || !strings.HasSuffix(l.Detail, "…") || len(l.Detail) < DetailFloor-2 {
			t.Fatalf("line %d: %+v", i, l)
		}
	}
	if n := sent.Notes[len(sent.Notes)-1]; !strings.Contains(n, "details were cut") {
		t.Errorf("no note of the cut: %q", sent.Notes)
	}
	if r.Lines[0].Detail != long {
		t.Error("Fit changed the report it was given")
	}
	back, err := Unmarshal(p)
	if err != nil || len(back.Lines) != len(r.Lines) {
		t.Fatalf("the payload does not read back: %v", err)
	}
}

// TestFitFailsARunWhoseOrphansDoNotFit: a node declared to the budget
// whose host also removes orphans of the generation before, which the
// budget leaves no room for, sends its recovery copy whole and is failed
// for that run by a line that says why, not outstanding.
func TestFitFailsARunWhoseOrphansDoNotFit(t *testing.T) {
	long := strings.Repeat("x", 4000)
	r := header()
	for _, s := range budgetFull("now", 3000) {
		l, e := worst(s.ID(), s.Kind, s.Path, s.Name)
		l.Detail = long
		r.Lines = append(r.Lines, l)
		r.Ledger = append(r.Ledger, e)
	}
	// More than the 1 MiB reserve of orphans' lines.
	for _, s := range budgetFull("before", 3000)[:1000] {
		r.Lines = append(r.Lines, outcome.Line{ID: s.ID(), Status: outcome.Removed})
	}
	p, sent, err := Fit(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) > MaxSize {
		t.Fatalf("payload of %d bytes, cap %d", len(p), MaxSize)
	}
	if sent.Outcome() != outcome.Failing || len(sent.Lines) != 1 || sent.Lines[0].ID != OverflowLineID {
		t.Fatalf("sent %d lines, outcome %v", len(sent.Lines), sent.Outcome())
	}
	if len(sent.Ledger) != len(r.Ledger) {
		t.Fatalf("sent %d ledger entries of %d", len(sent.Ledger), len(r.Ledger))
	}
}

// TestFitSendsAFailedReportRatherThanNone: a report whose lines are too
// many even with no details (orphans of many generations) is sent with
// its failed lines, its recovery copy and one more failed line saying
// what happened, so the node shows as failed, not outstanding.
func TestFitSendsAFailedReportRatherThanNone(t *testing.T) {
	id := "file:/srv/" + strings.Repeat("o", 1000)
	r := header()
	r.Lines = make([]outcome.Line, 70_000)
	for i := range r.Lines {
		r.Lines[i] = outcome.Line{ID: id, Status: outcome.Removed}
	}
	r.Lines[17] = outcome.Line{ID: "file:/etc/broken", Status: outcome.Failed, Detail: strings.Repeat("why ", 1000)}
	r.Ledger = []ledger.Entry{{ID: "file:/etc/kept", Kind: resource.File, Path: "/etc/kept", Created: true}}
	p, sent, err := Fit(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) > MaxSize {
		t.Fatalf("%d bytes", len(p))
	}
	if sent.Outcome() != outcome.Failing || len(sent.Lines) != 2 || sent.Lines[0].ID != "file:/etc/broken" || len(sent.Lines[0].Detail) > DetailFloor {
		t.Fatalf("lines sent: %+v", sent.Lines)
	}
	over := sent.Lines[1]
	want := fmt.Sprintf("the report of 70000 lines was %d bytes, over the 64 MiB cap on a report; only its 1 failed lines and the recovery copy were sent", len(Marshal(r)))
	if over.ID != OverflowLineID || over.Status != outcome.Failed || over.Detail != want {
		t.Errorf("overflow line %+v, want detail %q", over, want)
	}
	if len(sent.Ledger) != 1 {
		t.Error("the recovery copy was not sent")
	}
}

// TestFitRefusesWhatCannotFit: a recovery copy over the cap on its own
// cannot be sent; Fit says so, naming the node, the generation and the
// cap, and does not hand back a payload.
func TestFitRefusesWhatCannotFit(t *testing.T) {
	path := "/srv/" + strings.Repeat("l", 1000)
	r := header()
	r.Ledger = make([]ledger.Entry, 70_000)
	for i := range r.Ledger {
		r.Ledger[i] = ledger.Entry{ID: "file:" + path, Kind: resource.File, Path: path, Created: true}
	}
	p, sent, err := Fit(r)
	if err == nil || p != nil || sent != nil {
		t.Fatalf("Fit gave %d bytes, err %v", len(p), err)
	}
	if !strings.Contains(err.Error(), "node web-01: the report of generation 7 is") || !strings.Contains(err.Error(), "over the 64 MiB cap on a report; no report was sent") {
		t.Errorf("error: %v", err)
	}
	if fault.HintOf(err) == "" {
		t.Error("no hint")
	}
}

func TestCutLine(t *testing.T) {
	for _, d := range []string{strings.Repeat("é", 300), strings.Repeat("\x01", 300), strings.Repeat("\xff", 300), strings.Repeat("a\"", 300)} {
		l := cutLine(outcome.Line{Detail: d}, DetailFloor)
		if n := spelled(l.Detail); n > DetailFloor || n < DetailFloor-8 || !strings.HasSuffix(l.Detail, "…") {
			t.Errorf("cut %q to %q, %d bytes spelled", d[:8], l.Detail, n)
		}
	}
	if l := cutLine(outcome.Line{Detail: "short"}, DetailFloor); l.Detail != "short" {
		t.Errorf("a short detail was cut: %q", l.Detail)
	}
}
