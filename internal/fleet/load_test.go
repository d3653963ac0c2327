package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/report"
	"github.com/muster-tool/muster/spool"
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

// failingList is a spool whose listing of one prefix fails.
type failingList struct {
	*countingSpool
	prefix string
}

func (f failingList) ListNames(ctx context.Context, prefix string, fn func(string) error) error {
	if prefix == f.prefix {
		return fmt.Errorf("spool test: list %s: %w", prefix, spool.ErrUnavailable)
	}
	return f.countingSpool.ListNames(ctx, prefix, fn)
}

func (f failingList) ListDirs(ctx context.Context, prefix string, known func(string, spool.DirStamp) bool, fn func(spool.DirListing) error) error {
	if prefix == f.prefix {
		return fmt.Errorf("spool test: list %s: %w", prefix, spool.ErrUnavailable)
	}
	return f.countingSpool.ListDirs(ctx, prefix, known, fn)
}

// The reports and briefings are listed while the rest of a load goes on;
// a listing that fails still stops the load, and a Refresh, with its
// error, whichever of the two it is.
func TestLoadListingFails(t *testing.T) {
	f := newFixture(t)
	web := f.enrol("web", t0)
	f.commit(1, t0.Add(time.Hour), &generation.Manifest{Nodes: []generation.ManifestNode{assign(web)}})
	f.reportOK(web, 1, 1, t0.Add(2*time.Hour))
	good := f.m.Spool
	s := f.load(true)
	for _, prefix := range []string{spool.ReportPrefix, spool.BriefPrefix} {
		f.m.Spool = failingList{f.sp, prefix}
		if _, err := Load(f.ctx, f.m, f.reg, Options{CacheDir: f.cacheDir()}); !errors.Is(err, spool.ErrUnavailable) {
			t.Errorf("Load with the listing of %s failing: %v, want the spool unavailable", prefix, err)
		}
		s.mesh = f.m
		if err := s.Refresh(f.ctx); !errors.Is(err, spool.ErrUnavailable) {
			t.Errorf("Refresh with the listing of %s failing: %v, want the spool unavailable", prefix, err)
		}
	}
	f.m.Spool = good
	if v := f.view(f.load(true), 1, Selection{}); find(v, "web").Status != Applied {
		t.Errorf("web is %s once the spool lists again, want applied", find(v, "web").Status)
	}
}
