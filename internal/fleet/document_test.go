package fleet

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/testutil/jsonshape"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenFixture is a mesh with a node in every status, a refused and a
// flagged report, at fixed times.
func goldenFixture(t *testing.T) *fixture {
	f := newFixture(t)
	web1, web2, db1 := f.enrol("web-1", t0), f.enrol("web-2", t0), f.enrol("db-1", t0)
	laptop, build1 := f.enrol("laptop", t0), f.enrol("build-1", t0)
	web3 := f.enrol("web-3", t0)
	f.enrol("spare", t0)
	old := f.enrol("old-host", t0)
	for i, id := range f.reg.Active() {
		f.brief(id, 1, t0.Add(time.Duration(i)*time.Minute))
	}
	f.brief(build1, 2, t0.Add(10*time.Minute), "package-manager")
	f.commit(1, t0.Add(time.Hour), &generation.Manifest{
		Nodes:      []generation.ManifestNode{assign(web1), assign(web2), assign(db1), assign(laptop), assign(old), assign(web3)},
		Ineligible: []string{"build-1"}, Unassigned: []string{"spare"},
	})
	f.reportOK(db1, 1, 1, t0.Add(70*time.Minute))
	f.reportOK(web3, 1, 1, t0.Add(70*time.Minute))
	f.reportOK(old, 1, 1, t0.Add(70*time.Minute))
	f.commit(2, t0.Add(24*time.Hour), &generation.Manifest{
		Nodes:      []generation.ManifestNode{assign(web1), assign(web2), assign(db1), assign(laptop)},
		Ineligible: []string{"build-1"}, Unassigned: []string{"spare"},
		Wave: "first", Held: []generation.ManifestHeld{{Name: "web-3", NodeID: web3.NodeID, Generation: 1}},
	})
	r := f.report(web1, 2, t0.Add(25*time.Hour))
	r.Notes = []string{"ledger recovered from the recovery copy of generation 1"}
	f.write(web1, 2, 1, r)
	f.write(web2, 2, 1, f.report(web2, 2, t0.Add(25*time.Hour), "package:nginx", "service:nginx"))
	misfiled := f.report(db1, 2, t0.Add(26*time.Hour))
	misfiled.Node = "web-1"
	f.write(db1, 2, 1, misfiled)
	f.revoke(old, t0.Add(48*time.Hour), "host retired")
	return f
}

// normalize replaces the random node ids and commit digests (of commits
// signed by a new key every run) with stable names.
func normalize(f *fixture, s string) string {
	for id, ident := range f.reg.Identities {
		s = strings.ReplaceAll(s, id, "nodeid-of-"+ident.Name)
	}
	return regexp.MustCompile(`sha256:[0-9a-f]{64}`).ReplaceAllString(s, "sha256:digest-of-the-commit")
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the output (run go test -update after checking the change is intended):\n%s", path, got)
	}
}

// TestJSONGolden keeps the documented JSON schemas and their golden
// examples in step with the code, and checks both follow jsondoc's rules.
func TestJSONGolden(t *testing.T) {
	f := goldenFixture(t)
	s := f.load(false)
	v := f.view(s, 0, Selection{All: true})
	var b bytes.Buffer
	if err := WriteJSON(&b, v, true); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.json", normalize(f, b.String()))
	for _, p := range jsonshape.Check(b.Bytes(), jsonDoc{}) {
		t.Errorf("report.json: %s", p)
	}

	// Without --all the refused reports are counted, not listed.
	b.Reset()
	if err := WriteJSON(&b, f.view(s, 0, Selection{}), false); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version int
		Totals  map[string]int
		Refused struct {
			Revoked int
			Reports []any
		}
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Version != JSONVersion || doc.Refused.Revoked != 1 || doc.Refused.Reports == nil || len(doc.Refused.Reports) != 0 || doc.Totals["decommissioned"] != 0 {
		t.Errorf("without --all: %+v", doc)
	}

	h, err := s.History(f.ctx, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := WriteHistoryJSON(&b, h); err != nil {
		t.Fatal(err)
	}
	golden(t, "history.json", normalize(f, b.String()))
	for _, p := range jsonshape.Check(b.Bytes(), jsonHistory{}) {
		t.Errorf("history.json: %s", p)
	}
}
