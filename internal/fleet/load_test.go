package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/report"
)

// A report spelt otherwise than Marshal writes is read like any other,
// and one with a key no Report has is refused with the key named.
func TestLoadNonCanonical(t *testing.T) {
	f := newFixture(t)
	web := f.enrol("web", t0)
	db := f.enrol("db", t0)
	f.commit(1, t0.Add(time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(web), assign(db)}})

	doc := string(report.Marshal(f.report(web, 1, t0.Add(2*time.Hour), "service:nginx")))
	// Canonical: what Marshal writes reads back as itself (the report
	// package's tests check that it reads on the fast path).
	if r, err := report.Unmarshal([]byte(doc)); err != nil || string(report.Marshal(r)) != doc {
		t.Fatal("Marshal's output is not canonical")
	}
	f.writePayload(web, 1, 1, []byte("# written by hand\n"+strings.Replace(doc, " = ", "=", -1)))
	newer := f.writePayload(db, 1, 1, []byte(strings.Replace(doc, "muster = ", "rollout = \"canary\"\nmuster = ", 1)))

	v := f.view(f.load(false), 1, Selection{})
	if st := find(v, "web").Status; st != Failed {
		t.Errorf("web is %s, want failed as its report says", st)
	}
	if st := find(v, "db").Status; st != Outstanding {
		t.Errorf("db is %s, want outstanding: its report was refused", st)
	}
	if len(v.Refused) != 1 || v.Refused[0].Name != newer || v.Refused[0].Kind != RefusedUnverified ||
		!strings.Contains(v.Refused[0].Reason, `payload does not decode: unknown key "rollout"`) {
		t.Errorf("refused %+v", v.Refused)
	}
}
