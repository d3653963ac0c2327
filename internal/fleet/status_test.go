package fleet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/spool"
)

// TestClassification covers every combination of how generation 2's
// manifest lists a node with what the node reported. Each combination is
// one node of the same spool, so the nodes also show they do not disturb
// each other.
func TestClassification(t *testing.T) {
	listings := []string{"assigned", "ineligible", "unassigned", "held", "absent"}
	situations := []string{"ok", "failed", "older", "never", "revoked", "newer", "misfiled"}

	f := newFixture(t)
	ids := map[string]*enrol.Identity{}
	var man1, man2 generation.Manifest
	for _, l := range listings {
		for _, sit := range situations {
			name := l + "-" + sit
			id := f.enrol(name, t0)
			ids[name] = id
			if l == "ineligible" {
				f.brief(id, 1, t0.Add(30*time.Minute), "free-root")
			} else {
				f.brief(id, 1, t0.Add(30*time.Minute))
			}
			man1.Nodes = append(man1.Nodes, assign(id))
			switch l {
			case "assigned":
				man2.Nodes = append(man2.Nodes, assign(id))
			case "ineligible":
				man2.Ineligible = append(man2.Ineligible, name)
			case "unassigned":
				man2.Unassigned = append(man2.Unassigned, name)
			case "held":
				man2.Held = append(man2.Held, generation.ManifestHeld{Name: name, NodeID: id.NodeID, Generation: 1})
			}
		}
	}
	man2.Wave = "canary"
	f.commit(1, t0.Add(time.Hour), &man1)
	f.commit(2, t0.Add(2*time.Hour), &man2)
	reported := t0.Add(3 * time.Hour)
	for name, id := range ids {
		switch {
		case strings.HasSuffix(name, "-ok"):
			f.reportOK(id, 2, 1, reported)
		case strings.HasSuffix(name, "-failed"):
			f.write(id, 2, 1, f.report(id, 2, reported, "package:nginx"))
		case strings.HasSuffix(name, "-older"):
			f.reportOK(id, 1, 1, t0.Add(90*time.Minute))
		case strings.HasSuffix(name, "-revoked"):
			f.reportOK(id, 2, 1, reported)
			f.enrol(name, t0.Add(4*time.Hour)) // re-enrolled: id is revoked
		case strings.HasSuffix(name, "-newer"):
			f.reportOK(id, 3, 1, reported) // generation 3 is not committed
		case strings.HasSuffix(name, "-misfiled"):
			r := f.report(id, 2, reported)
			r.Node = "assigned-ok" // signed by this node, claiming another
			f.write(id, 2, 1, r)
		}
	}

	type want struct {
		status      Status
		lastApplied uint64
		failed      string // the ids of the failed lines, comma-separated
		note        string // a substring of the note
	}
	wants := map[string]want{
		"assigned-ok":       {Applied, 2, "", ""},
		"assigned-failed":   {Failed, 0, "package:nginx", ""},
		"assigned-older":    {Outstanding, 1, "", ""},
		"assigned-never":    {Outstanding, 0, "", ""},
		"assigned-revoked":  {Outstanding, 0, "", "which " + f.reg.Nodes["assigned-revoked"].Current.NodeID + " has replaced"},
		"assigned-newer":    {Outstanding, 0, "", ""},
		"assigned-misfiled": {Outstanding, 0, "", ""},
		// The new identity has sent no briefing.
		"ineligible-revoked": {Ineligible, 0, "", "no briefing"},
		"absent-revoked":     {Unassigned, 0, "", "enrolled after generation 2 was declared"},
	}
	for _, sit := range situations {
		for l, w := range map[string]want{
			"ineligible": {Ineligible, 0, "free-root", ""},
			"unassigned": {Unassigned, 0, "", "no role of generation 2 selects it"},
			"held":       {Held, 0, "", "keeps generation 1; generation 2 is for wave canary only"},
			"absent":     {Unassigned, 0, "", "not in the manifest of generation 2"},
		} {
			if _, ok := wants[l+"-"+sit]; !ok {
				w.lastApplied = map[string]uint64{"ok": 2, "older": 1}[sit]
				wants[l+"-"+sit] = w
			}
		}
	}
	// What is refused or flagged, by node and kind.
	wantObjects := map[string]string{"revoked": RefusedRevoked, "newer": FlaggedNewer, "misfiled": FlaggedMisfiled}

	v := f.view(f.load(false), 0, Selection{})
	if v.Generation != 2 || v.Newest != 2 || !v.Manifest || v.Wave != "canary" {
		t.Fatalf("view of generation %d (newest %d, manifest %v), want 2 (2, true)", v.Generation, v.Newest, v.Manifest)
	}
	if len(v.Nodes) != len(wants) {
		t.Errorf("%d nodes, want %d", len(v.Nodes), len(wants))
	}
	objects := map[string][]string{}
	for _, o := range append(v.Refused, v.Flagged...) {
		objects[o.Node] = append(objects[o.Node], o.Kind)
	}
	for name, w := range wants {
		t.Run(name, func(t *testing.T) {
			n := find(v, name)
			if n == nil {
				t.Fatal("missing from the view")
			}
			var failed []string
			for _, l := range n.FailedLines {
				failed = append(failed, l.ID)
			}
			if n.Status != w.status || n.LastApplied != w.lastApplied || strings.Join(failed, ",") != w.failed || !strings.Contains(n.Note, w.note) {
				t.Errorf("got %s, last applied %d, failed lines %q, note %q; want %s, %d, %q, note containing %q",
					n.Status, n.LastApplied, failed, n.Note, w.status, w.lastApplied, w.failed, w.note)
			}
			if n.NodeID != f.reg.Nodes[name].Current.NodeID {
				t.Errorf("node id %s, want the current identity %s", n.NodeID, f.reg.Nodes[name].Current.NodeID)
			}
			sit := name[strings.Index(name, "-")+1:]
			wantKinds := ""
			if k, ok := wantObjects[sit]; ok {
				wantKinds = k
			}
			if got := strings.Join(objects[name], ","); got != wantKinds {
				t.Errorf("refused and flagged reports: %q, want %q", got, wantKinds)
			}
			if (n.Status == Applied || n.Status == Failed) != (n.Report != nil) {
				t.Errorf("status %s with report %+v", n.Status, n.Report)
			}
			if (n.Status == Held) != (n.HeldOn == 1) {
				t.Errorf("status %s, held on generation %d", n.Status, n.HeldOn)
			}
		})
	}
	tot := v.Totals
	if tot.Applied != 1 || tot.Failed != 1 || tot.Outstanding != 5 || tot.Ineligible != 7 || tot.Unassigned != 14 || tot.Held != 7 || tot.Nodes != 35 {
		t.Errorf("totals %+v", tot)
	}
}

// TestPrecedence covers the rules that decide between the statuses when
// the manifest and the node's state now disagree.
func TestPrecedence(t *testing.T) {
	f := newFixture(t)
	declared := t0.Add(time.Hour)
	// Assigned, then a briefing failed: still judged on the generation.
	became := f.enrol("became-ineligible", t0)
	f.brief(became, 1, t0, "free-root")
	f.brief(became, 2, declared.Add(time.Hour), "free-root")
	// Ineligible when declared, passes now.
	recovered := f.enrol("recovered", t0)
	f.brief(recovered, 1, declared.Add(time.Hour))
	// Not in the manifest, briefing failing now.
	absentFailing := f.enrol("absent-failing", t0)
	f.brief(absentFailing, 1, t0, "package-manager")
	// Enrolled after the generation was declared.
	late := f.enrol("late", declared.Add(time.Minute))
	f.brief(late, 1, declared.Add(time.Minute))
	// Retried: the newest report of the generation decides.
	retriedOK := f.enrol("retried-ok", t0)
	retriedFailed := f.enrol("retried-failed", t0)
	f.commit(1, declared, &generation.Manifest{
		Nodes:      []generation.ManifestNode{assign(became), assign(retriedOK), assign(retriedFailed)},
		Ineligible: []string{"recovered"},
	})
	f.reportOK(became, 1, 1, declared.Add(30*time.Minute))
	f.write(retriedOK, 1, 1, f.report(retriedOK, 1, declared.Add(time.Minute), "service:nginx"))
	f.reportOK(retriedOK, 1, 2, declared.Add(2*time.Minute))
	f.reportOK(retriedFailed, 1, 1, declared.Add(time.Minute))
	f.write(retriedFailed, 1, 2, f.report(retriedFailed, 1, declared.Add(2*time.Minute), "service:nginx"))

	v := f.view(f.load(false), 1, Selection{})
	for _, c := range []struct {
		name   string
		status Status
		note   string
		failed int
	}{
		{"became-ineligible", Applied, "", 0},
		{"recovered", Ineligible, "passes now", 0},
		{"absent-failing", Ineligible, "", 1},
		{"late", Unassigned, "enrolled after generation 1 was declared", 0},
		{"retried-ok", Applied, "", 0},
		{"retried-failed", Failed, "", 1},
	} {
		n := find(v, c.name)
		if n == nil || n.Status != c.status || !strings.Contains(n.Note, c.note) || len(n.FailedLines) != c.failed {
			t.Errorf("%s: got %+v, want %s with note %q and %d failed lines", c.name, n, c.status, c.note, c.failed)
		}
	}
	if n := find(v, "retried-failed"); n.Report == nil || n.Report.Seq != 2 || n.FailedLines[0].Detail != "service:nginx could not be verified" {
		t.Errorf("retried-failed: report %+v, failed lines %+v: want seq 2 with the host's reason", n.Report, n.FailedLines)
	}
}

// TestLastContactHasNoThreshold: a node silent for a year is outstanding,
// with its last contact as it is; nothing in a view depends on the time
// it is computed.
func TestLastContactHasNoThreshold(t *testing.T) {
	f := newFixture(t)
	laptop := f.enrol("laptop", t0)
	f.brief(laptop, 1, t0.Add(2*time.Hour))
	f.commit(1, t0.Add(time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(laptop)}})
	f.reportOK(laptop, 1, 1, t0.Add(90*time.Minute))
	f.commit(2, t0.Add(365*24*time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(laptop)}})

	n := find(f.view(f.load(false), 0, Selection{}), "laptop")
	// The briefing is newer than the report, so it is the last contact.
	if n.Status != Outstanding || n.LastApplied != 1 || !n.LastContact.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("got %s, last applied %d, last contact %v; want outstanding, 1, %v", n.Status, n.LastApplied, n.LastContact, t0.Add(2*time.Hour))
	}
}

func TestDecommissionedAndSelection(t *testing.T) {
	f := newFixture(t)
	gone := f.enrol("gone", t0)
	web := f.enrol("web", t0)
	f.commit(1, t0.Add(time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(gone), assign(web)}})
	f.reportOK(gone, 1, 1, t0.Add(2*time.Hour))
	f.reportOK(web, 1, 1, t0.Add(2*time.Hour))
	f.revoke(gone, t0.Add(3*time.Hour), "host retired")
	s := f.load(false)

	v := f.view(s, 1, Selection{})
	if len(v.Nodes) != 1 || v.Nodes[0].Name != "web" {
		t.Errorf("default view lists %+v, want only web", v.Nodes)
	}
	if len(v.Refused) != 1 || v.Refused[0].Kind != RefusedRevoked || !strings.Contains(v.Refused[0].Reason, "host retired") {
		t.Errorf("refused %+v, want gone's report, refused as revoked", v.Refused)
	}
	v = f.view(s, 1, Selection{All: true})
	if n := find(v, "gone"); n == nil || n.Status != Decommissioned || v.Totals.Decommissioned != 1 || v.Totals.Applied != 1 {
		t.Errorf("--all: gone is %+v, totals %+v", n, v.Totals)
	}
	v = f.view(s, 1, Selection{Names: []string{"gone"}})
	if len(v.Nodes) != 1 || v.Nodes[0].Status != Decommissioned {
		t.Errorf("a named decommissioned node: %+v", v.Nodes)
	}
	if _, err := s.Generation(f.ctx, 1, Selection{Names: []string{"nosuch"}}); err == nil || !strings.Contains(err.Error(), "node nosuch is not enrolled") {
		t.Errorf("unknown node: %v", err)
	}
	if _, err := s.Generation(f.ctx, 7, Selection{}); err == nil || !strings.Contains(err.Error(), "generation 7 is not committed") {
		t.Errorf("generation 7: %v", err)
	}
}

func TestNoGeneration(t *testing.T) {
	f := newFixture(t)
	f.enrol("web", t0)
	_, err := f.load(false).Generation(f.ctx, 0, Selection{})
	if !errors.Is(err, generation.ErrNoGeneration) {
		t.Errorf("got %v, want %v", err, generation.ErrNoGeneration)
	}
}

// TestMissingManifest: without the manifest (a partial copy of the spool)
// every eligible node is taken as assigned, with a warning.
func TestMissingManifest(t *testing.T) {
	f := newFixture(t)
	web := f.enrol("web", t0)
	f.enrol("db", t0)
	broken := f.enrol("broken", t0)
	f.brief(broken, 1, t0, "package-manager")
	f.commit(1, t0.Add(time.Hour), nil)
	f.reportOK(web, 1, 1, t0.Add(2*time.Hour))
	s := f.load(false)
	v := f.view(s, 1, Selection{})
	if v.Manifest || find(v, "web").Status != Applied || find(v, "db").Status != Outstanding || find(v, "broken").Status != Ineligible {
		t.Errorf("without a manifest: %+v", v.Nodes)
	}
	if !strings.Contains(strings.Join(s.Warnings, "\n"), "generation 1: its manifest") {
		t.Errorf("warnings %q: want one about the manifest", s.Warnings)
	}
}

// TestRefusedReports tampers for real: a flipped byte, a report signed by
// another key, a report under a node id nobody has.
func TestRefusedReports(t *testing.T) {
	f := newFixture(t)
	web := f.enrol("web", t0)
	db := f.enrol("db", t0)
	f.commit(1, t0.Add(time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(web), assign(db)}})

	// Flip one byte of web's report in the spool directory.
	name := f.reportOK(web, 1, 1, t0.Add(2*time.Hour))
	file := filepath.Join(f.dir, "spool", filepath.FromSlash(name))
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-10] ^= 1
	os.Chmod(file, 0o644)
	if err := os.WriteFile(file, data, 0o444); err != nil {
		t.Fatal(err)
	}
	// A report filed as db's, signed by another key.
	other := f.enrol("other", t0)
	r := f.report(db, 1, t0.Add(2*time.Hour))
	forged, err := sealAs(f, other, db.NodeID, 1, 1, r)
	if err != nil {
		t.Fatal(err)
	}
	f.put(spool.ReportName(db.NodeID, 1, 1), forged)
	// A report under a node id no identity has.
	ghost := spool.ReportName("0123456789abcdef0123456789abcdef", 1, 1)
	f.put(ghost, forged)

	v := f.view(f.load(false), 1, Selection{})
	for _, n := range []string{"web", "db"} {
		if st := find(v, n).Status; st != Outstanding {
			t.Errorf("%s is %s, want outstanding: a refused report counts for nothing", n, st)
		}
	}
	got := map[string]string{}
	for _, o := range v.Refused {
		got[o.Name] = o.Kind + ": " + o.Reason
	}
	for obj, want := range map[string]string{
		name:                              "unverified: ",
		spool.ReportName(db.NodeID, 1, 1): "unverified: ",
		ghost:                             "unknown: no identity 0123456789abcdef0123456789abcdef was ever admitted",
	} {
		if !strings.HasPrefix(got[obj], want) {
			t.Errorf("%s: %q, want %q...", obj, got[obj], want)
		}
	}
	if len(v.Refused) != 3 || v.RefusedCounts()[RefusedUnverified] != 2 || v.RefusedCounts()[RefusedUnknown] != 1 {
		t.Errorf("refused %+v", v.Refused)
	}
	if !strings.Contains(got[spool.ReportName(db.NodeID, 1, 1)], "signed by an unexpected key") {
		t.Errorf("forged report: %s", got[spool.ReportName(db.NodeID, 1, 1)])
	}
}

func TestSortNodes(t *testing.T) {
	ns := []NodeStatus{
		{Name: "b", Status: Applied, LastContact: t0.Add(2 * time.Hour)},
		{Name: "a", Status: Outstanding, LastContact: t0.Add(time.Hour)},
		{Name: "c", Status: Failed},
		{Name: "d", Status: Outstanding},
	}
	for by, want := range map[string]string{"name": "abcd", "status": "cadb", "contact": "cdab"} {
		if err := SortNodes(ns, by); err != nil {
			t.Fatal(err)
		}
		var got string
		for _, n := range ns {
			got += n.Name
		}
		if got != want {
			t.Errorf("--sort %s: %s, want %s", by, got, want)
		}
	}
	if err := SortNodes(ns, "age"); err == nil {
		t.Error("--sort age: no error")
	}
}

func TestHistory(t *testing.T) {
	f := newFixture(t)
	web := f.enrol("web", t0)
	db := f.enrol("db", t0)
	f.commit(1, t0.Add(time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(web), assign(db)}})
	f.commit(2, t0.Add(2*time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(web), assign(db)}})
	f.reportOK(web, 1, 1, t0.Add(70*time.Minute))
	f.write(db, 1, 1, f.report(db, 1, t0.Add(70*time.Minute), "file:/etc/motd"))
	f.reportOK(web, 2, 1, t0.Add(3*time.Hour))
	h, err := f.load(false).History(f.ctx, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(h[0].Generation, h[0].Totals.Applied, h[0].Totals.Failed, h[0].Totals.Outstanding, " ",
		h[1].Generation, h[1].Totals.Applied, h[1].Totals.Failed, h[1].Totals.Outstanding)
	if len(h) != 2 || got != "2 1 0 1 1 1 1 0" {
		t.Errorf("history %s, want 2 1 0 1 1 1 1 0 (newest first: generation, applied, failed, outstanding)", got)
	}
}

// TestUnknownLineStatusFails: a line with a status this muster does not know
// fails the report, as outcome.Of says.
func TestUnknownLineStatusFails(t *testing.T) {
	f := newFixture(t)
	web := f.enrol("web", t0)
	f.commit(1, t0.Add(time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(web)}})
	r := f.report(web, 1, t0.Add(2*time.Hour))
	r.Lines = append(r.Lines, outcome.Line{ID: "file:/etc/hosts", Status: "skipped"})
	f.write(web, 1, 1, r)
	if n := find(f.view(f.load(false), 1, Selection{}), "web"); n.Status != Failed || len(n.FailedLines) != 1 {
		t.Errorf("got %+v, want failed on the unknown status", n)
	}
}

// TestHistoryKeepsOneNodeList: the manifests report reads of generations
// that assigned the same nodes hold one node list between them, not one
// each (see sharedVersion); one that assigned others holds its own.
func TestHistoryKeepsOneNodeList(t *testing.T) {
	f := newFixture(t)
	web := f.enrol("web", t0)
	db := f.enrol("db", t0)
	both := &generation.Manifest{Nodes: []generation.ManifestNode{assign(web), assign(db)}}
	f.commit(1, t0.Add(time.Hour), both)
	f.commit(2, t0.Add(2*time.Hour), both)
	f.commit(3, t0.Add(3*time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(web)}})
	f.commit(4, t0.Add(4*time.Hour), both)
	s := f.load(false)
	if _, err := s.History(f.ctx, Selection{}); err != nil {
		t.Fatal(err)
	}
	m := s.cache.Manifests
	same := func(a, b uint64) bool {
		return len(m[a].IDs) > 0 && unsafe.SliceData(m[a].IDs) == unsafe.SliceData(m[b].IDs) && unsafe.SliceData(m[a].Names) == unsafe.SliceData(m[b].Names)
	}
	if !same(1, 2) || same(2, 3) || same(3, 4) {
		t.Errorf("shared node lists: 1-2 %v, 2-3 %v, 3-4 %v; want only 1-2", same(1, 2), same(2, 3), same(3, 4))
	}
	if len(m[1].IDs) != 2 || len(m[3].IDs) != 1 || len(m[4].IDs) != 2 {
		t.Errorf("node lists of %d, %d and %d ids, want 2, 1 and 2", len(m[1].IDs), len(m[3].IDs), len(m[4].IDs))
	}
}
