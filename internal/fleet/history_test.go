package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/report"
	"github.com/muster-tool/muster/spool"
)

// The story: two copies of the spool each grew a generation 1, hosts at one
// site applied theirs, and the copies were merged. A node whose report
// names another commit of generation 1 than the spool's has not applied
// this generation 1: it is not counted as applied, it is flagged as a
// fork, and its status says why.
func TestReportOfAnotherCommitIsNotApplied(t *testing.T) {
	f := newFixture(t)
	var man generation.Manifest
	ids := map[string]string{}
	for _, name := range []string{"ours", "theirs", "old"} {
		id := f.enrol(name, t0)
		ids[name] = id.NodeID
		man.Nodes = append(man.Nodes, assign(id))
	}
	c := f.commitAfter(1, t0.Add(time.Hour), &man, nil, "")
	node := func(name string) *report.Report {
		return f.report(f.reg.Nodes[name].Current, 1, t0.Add(2*time.Hour))
	}
	r := node("ours")
	r.Commit = c.Digest
	f.write(f.reg.Nodes["ours"].Current, 1, 1, r)
	r = node("theirs")
	r.Commit = "sha256:" + strings.Repeat("ab", 32)
	f.write(f.reg.Nodes["theirs"].Current, 1, 1, r)
	f.write(f.reg.Nodes["old"].Current, 1, 1, node("old")) // a host that does not say

	v := f.view(f.load(true), 1, Selection{})
	if got := find(v, "ours").Status; got != Applied {
		t.Errorf("ours: %s, want applied", got)
	}
	if got := find(v, "old").Status; got != Applied {
		t.Errorf("a report that names no commit: %s, want applied", got)
	}
	th := find(v, "theirs")
	if th.Status != Outstanding || !strings.Contains(th.Note, "another history") || !strings.Contains(th.Note, "sha256:abababababab") {
		t.Errorf("theirs: %s, note %q; want outstanding, naming the other commit", th.Status, th.Note)
	}
	if th.LastApplied != 0 {
		t.Errorf("theirs last applied %d", th.LastApplied)
	}
	if len(v.Flagged) != 1 || v.Flagged[0].Kind != FlaggedFork || v.Flagged[0].NodeID != ids["theirs"] ||
		!strings.Contains(v.Flagged[0].Reason, generation.ShortDigest(c.Digest)) {
		t.Errorf("flagged %+v, want theirs' report as a fork naming the spool's commit", v.Flagged)
	}
}

// Commits that do not follow each other are named as forks, and a spool
// behind the mesh's remembered history is named too.
func TestReportNamesForksAndAnOlderSpool(t *testing.T) {
	f := newFixture(t)
	c1 := f.commitAfter(1, t0, nil, nil, "")
	f.commitAfter(2, t0.Add(time.Hour), nil, c1, "")
	other := &generation.Commit{Generation: 2, Digest: "sha256:" + strings.Repeat("cd", 32)}
	f.commitAfter(3, t0.Add(2*time.Hour), nil, other, "")
	s := f.load(true)
	if len(s.Forks) != 1 || s.Forks[0].Generation != 3 || s.Forks[0].At != 2 {
		t.Fatalf("forks %+v", s.Forks)
	}
	if w := strings.Join(s.Warnings, "\n"); !strings.Contains(w, "fork in spool") || !strings.Contains(w, "two histories") {
		t.Errorf("warnings %q", w)
	}

	// The mesh remembers generation 9: this spool is behind it.
	if err := f.m.RecordHead(mesh.Head{Generation: 9, Commit: "sha256:" + strings.Repeat("ef", 32), CommittedAt: t0}); err != nil {
		t.Fatal(err)
	}
	s = f.load(true)
	if w := strings.Join(s.Warnings, "\n"); !strings.Contains(w, "older than this mesh's history") || !strings.Contains(w, "generation 9") {
		t.Errorf("warnings %q", w)
	}
}

// The report cache keeps commits by generation. A spool restored in place
// from another copy, holding another commit of a cached generation, is
// noticed: the cache's commits are read again and the view is of the
// spool's commit.
func TestReportCacheNoticesRestoredSpool(t *testing.T) {
	f := newFixture(t)
	id := f.enrol("web-1", t0)
	man := generation.Manifest{Nodes: []generation.ManifestNode{assign(id)}}
	f.commitAfter(1, t0, &man, nil, "runaaaa")
	if v := f.view(f.load(true), 1, Selection{}); v.Run != "runaaaa" {
		t.Fatalf("run %s", v.Run)
	}
	if err := os.Remove(filepath.Join(f.dir, "spool", filepath.FromSlash(spool.CommitName(1)))); err != nil {
		t.Fatal(err)
	}
	man = generation.Manifest{Nodes: []generation.ManifestNode{assign(id)}}
	f.commitAfter(1, t0.Add(time.Minute), &man, nil, "runbbbb")
	s := f.load(true)
	if v := f.view(s, 1, Selection{}); v.Run != "runbbbb" {
		t.Errorf("after the spool was restored: run %s, want runbbbb", v.Run)
	}
	if w := strings.Join(s.Warnings, "\n"); !strings.Contains(w, "not the ones the report cache holds") {
		t.Errorf("warnings %q", w)
	}
}
