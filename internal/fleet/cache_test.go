package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/spool"
)

// cacheFixture is a small mesh with every kind of object report reads.
func cacheFixture(t *testing.T) (*fixture, map[string]*enrol.Identity) {
	f := newFixture(t)
	ids := map[string]*enrol.Identity{}
	var man generation.Manifest
	for _, name := range []string{"web-1", "web-2", "db-1", "laptop"} {
		id := f.enrol(name, t0)
		ids[name] = id
		f.brief(id, 1, t0.Add(time.Minute))
		man.Nodes = append(man.Nodes, assign(id))
	}
	f.commit(1, t0.Add(time.Hour), &man)
	f.reportOK(ids["web-1"], 1, 1, t0.Add(2*time.Hour))
	f.reportOK(ids["web-2"], 1, 1, t0.Add(2*time.Hour))
	f.write(ids["db-1"], 1, 1, f.report(ids["db-1"], 1, t0.Add(2*time.Hour), "package:postgresql"))
	f.reportOK(ids["web-1"], 2, 1, t0.Add(3*time.Hour)) // flagged: generation 2 is not committed yet
	return f, ids
}

// TestCacheSecondRunReadsNothingOld counts the spool's Gets: the second
// run reads no object, a third reads exactly the new ones, and every run
// gives the same answer as a run without a cache.
func TestCacheSecondRunReadsNothingOld(t *testing.T) {
	f, ids := cacheFixture(t)
	uncached := func() string {
		t.Helper()
		v := jsonOf(t, f.view(f.load(false), 0, Selection{All: true}))
		f.sp.take()
		return v
	}
	want := uncached()

	s := f.load(true)
	first := jsonOf(t, f.view(s, 0, Selection{All: true}))
	if n := len(f.sp.take()); n < 9 {
		t.Fatalf("the first run read %d objects, want every report, briefing, commit and manifest", n)
	}
	if first != want {
		t.Fatalf("with a cache:\n%s\nwithout:\n%s", first, want)
	}
	if strings.Join(s.Warnings, "") == "" {
		t.Error("no warning that the cache was missing")
	}

	s = f.load(true)
	second := jsonOf(t, f.view(s, 0, Selection{All: true}))
	if got := f.sp.takeData(); len(got) != 0 {
		t.Errorf("the second run read %q, want nothing", got)
	}
	if second != want {
		t.Errorf("second run:\n%s\nwant:\n%s", second, want)
	}
	if len(s.Warnings) != 0 {
		t.Errorf("warnings %q", s.Warnings)
	}

	// Something new: a report and a briefing.
	newReport := f.reportOK(ids["laptop"], 1, 1, t0.Add(5*time.Hour))
	f.brief(ids["db-1"], 2, t0.Add(5*time.Hour), "free-root")
	v := f.view(f.load(true), 0, Selection{All: true})
	got := f.sp.takeData()
	wantGets := []string{"brief/" + ids["db-1"].NodeID + "/00000000000000000002", newReport}
	if strings.Join(got, " ") != strings.Join(wantGets, " ") {
		t.Errorf("the third run read %q, want only the new objects %q", got, wantGets)
	}
	if find(v, "laptop").Status != Applied {
		t.Errorf("laptop is %s after its report", find(v, "laptop").Status)
	}
	if jsonOf(t, v) != uncached() {
		t.Error("the cached answer differs from the uncached one after new objects")
	}
}

// TestCacheRebuilt: a deleted or damaged cache is rebuilt with a warning,
// never an error, and gives the same answer.
func TestCacheRebuilt(t *testing.T) {
	for _, c := range []struct {
		name    string
		damage  func(path string) error
		warning string
	}{
		{"deleted", os.Remove, "no report cache"},
		{"flipped byte", func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[len(b)/2] ^= 0x40
			return os.WriteFile(p, b, 0o600)
		}, "checksum does not match"},
		{"truncated", func(p string) error { return os.Truncate(p, 100) }, "checksum does not match"},
		{"empty", func(p string) error { return os.Truncate(p, 0) }, "not a report cache"},
		{"garbage", func(p string) error {
			return os.WriteFile(p, []byte("muster report cache\n"+strings.Repeat("x", 64)), 0o600)
		}, "checksum does not match"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, _ := cacheFixture(t)
			want := jsonOf(t, f.view(f.load(true), 0, Selection{All: true}))
			path := CachePath(f.cacheDir(), f.m.Spool.String())
			if err := c.damage(path); err != nil {
				t.Fatal(err)
			}
			f.sp.take()
			s := f.load(true)
			if got := jsonOf(t, f.view(s, 0, Selection{All: true})); got != want {
				t.Errorf("after the cache was %s:\n%s\nwant:\n%s", c.name, got, want)
			}
			if w := strings.Join(s.Warnings, "\n"); !strings.Contains(w, c.warning) {
				t.Errorf("warnings %q, want one saying %q", w, c.warning)
			}
			if len(f.sp.take()) == 0 {
				t.Error("nothing was read again")
			}
			// Rebuilt: the next run reads nothing.
			f.load(true)
			if got := f.sp.takeData(); len(got) != 0 {
				t.Errorf("the run after the rebuild read %q", got)
			}
		})
	}
}

// TestCacheKeepsFactsNotTrust: revoking an identity after its reports
// were cached refuses them at once, without reading them again.
func TestCacheKeepsFactsNotTrust(t *testing.T) {
	f, ids := cacheFixture(t)
	if st := find(f.view(f.load(true), 1, Selection{}), "web-2").Status; st != Applied {
		t.Fatalf("web-2 is %s before the revocation", st)
	}
	f.sp.take()
	f.revoke(ids["web-2"], t0.Add(4*time.Hour), "stolen laptop")
	v := f.view(f.load(true), 1, Selection{All: true})
	if got := f.sp.takeData(); len(got) != 0 {
		t.Errorf("read %q, want nothing", got)
	}
	if st := find(v, "web-2").Status; st != Decommissioned {
		t.Errorf("web-2 is %s after its revocation", st)
	}
	if c := v.RefusedCounts(); c[RefusedRevoked] != 1 {
		t.Errorf("refused %+v, want web-2's report refused as revoked", v.Refused)
	}
}

// TestCacheNewCommitUnflags: a report of a generation that was not yet
// committed is flagged; once the commit arrives it counts, from the cache.
func TestCacheNewCommitUnflags(t *testing.T) {
	f, ids := cacheFixture(t)
	v := f.view(f.load(true), 0, Selection{})
	if len(v.Flagged) != 1 || v.Flagged[0].Kind != FlaggedNewer {
		t.Fatalf("flagged %+v, want web-1's report of generation 2", v.Flagged)
	}
	f.commit(2, t0.Add(150*time.Minute), &generation.Manifest{Nodes: []generation.ManifestNode{assign(ids["web-1"])}})
	f.sp.take()
	s := f.load(true)
	v = f.view(s, 0, Selection{})
	got := f.sp.take()
	// The new commit and manifest, and web-1's generation 2 report again
	// for its recovery copy: when it was read it was not usable, so its
	// ledger was not kept.
	if len(got) != 3 || !strings.HasPrefix(got[0], "commit/") || !strings.HasPrefix(got[1], "manifest/") || !strings.HasPrefix(got[2], "report/") {
		t.Errorf("read %q, want the new commit, its manifest and one report", got)
	}
	if v.Generation != 2 || len(v.Flagged) != 0 || find(v, "web-1").Status != Applied {
		t.Errorf("generation %d, flagged %+v, web-1 %s", v.Generation, v.Flagged, find(v, "web-1").Status)
	}
	rc, err := s.RecoveryCopies()
	if err != nil {
		t.Fatal(err)
	}
	if rc["web-1"].Generation != 2 {
		t.Errorf("web-1's recovery copy is from generation %d, want 2", rc["web-1"].Generation)
	}
}

// TestCacheGone: objects removed from the spool (spool gc) leave the cache.
func TestCacheGone(t *testing.T) {
	f, ids := cacheFixture(t)
	f.load(true)
	name := "report/" + ids["db-1"].NodeID + "/00000000000000000001-00000000000000000001"
	if err := f.sp.Delete(f.ctx, name); err != nil {
		t.Fatal(err)
	}
	v := f.view(f.load(true), 1, Selection{})
	if st := find(v, "db-1").Status; st != Outstanding {
		t.Errorf("db-1 is %s after its only report was removed", st)
	}
	v = f.view(f.load(true), 1, Selection{})
	if st := find(v, "db-1").Status; st != Outstanding {
		t.Errorf("db-1 is %s on the next run", st)
	}
}

// TestCacheConcurrentRuns: runs at the same time leave a cache the next
// run can use.
func TestCacheConcurrentRuns(t *testing.T) {
	f, _ := cacheFixture(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Load(f.ctx, f.m, f.reg, Options{CacheDir: f.cacheDir()})
			if err == nil {
				_, err = s.Generation(f.ctx, 0, Selection{})
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	f.sp.take()
	s := f.load(true)
	if len(s.Warnings) != 0 || len(f.sp.takeData()) != 0 {
		t.Errorf("after concurrent runs: warnings %q", s.Warnings)
	}
	ents, _ := os.ReadDir(f.cacheDir())
	if len(ents) != 1 {
		t.Errorf("cache directory holds %d files, want 1 (no temp files left)", len(ents))
	}
}

// TestCachePerSpool: the same mesh used with another spool keeps another
// cache.
func TestCachePerSpool(t *testing.T) {
	a, b := CachePath("/m/cache", "dir:/srv/spool"), CachePath("/m/cache", "dir:/media/usb/spool")
	if a == b || filepath.Dir(a) != "/m/cache" {
		t.Errorf("cache paths %s and %s", a, b)
	}
}

// TestCacheSizes: a report on a directory spool knows objects by name, as
// they never change; where the listing gives sizes for free it also
// rereads an object whose size changed behind the spool's back.
func TestCacheSizes(t *testing.T) {
	f, ids := cacheFixture(t)
	want := jsonOf(t, f.view(f.load(true), 0, Selection{All: true}))
	f.sp.take()
	names := f.m.Spool
	f.m.Spool = listOnly{f.sp}
	if got := jsonOf(t, f.view(f.load(true), 0, Selection{All: true})); got != want {
		t.Errorf("listed with sizes:\n%s\nwant:\n%s", got, want)
	}
	if got := f.sp.takeData(); len(got) != 0 {
		t.Errorf("listed with sizes, the cached run read %q, want nothing", got)
	}

	// Truncate web-2's report in place.
	name := spool.ReportName(ids["web-2"].NodeID, 1, 1)
	file := filepath.Join(f.dir, "spool", filepath.FromSlash(name))
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(file, 0o644)
	if err := os.WriteFile(file, data[:len(data)/2], 0o444); err != nil {
		t.Fatal(err)
	}
	f.m.Spool = names
	if find(f.view(f.load(true), 1, Selection{}), "web-2").Status != Applied || len(f.sp.takeData()) != 0 {
		t.Error("listed by name, a known report was read again")
	}
	f.m.Spool = listOnly{f.sp}
	v := f.view(f.load(true), 1, Selection{})
	if got := f.sp.takeData(); strings.Join(got, " ") != name {
		t.Errorf("listed with sizes, the run read %q, want the changed %s", got, name)
	}
	if find(v, "web-2").Status != Outstanding || len(v.Refused) != 1 || v.Refused[0].Name != name {
		t.Errorf("web-2 is %s, refused %+v: want its truncated report refused", find(v, "web-2").Status, v.Refused)
	}
}

// TestCacheSkipsUnchangedDirectories: once a node's directories have
// settled, a run with nothing new reads none of them, only stats them;
// anything added to one, even by a copy that sets the directory's times
// back as rsync -a does, is found.
func TestCacheSkipsUnchangedDirectories(t *testing.T) {
	f, ids := cacheFixture(t)
	want := func() string {
		t.Helper()
		v := jsonOf(t, f.view(f.load(false), 0, Selection{All: true}))
		f.sp.take()
		return v
	}
	settle := func() { time.Sleep(spool.StampSettle + 100*time.Millisecond) }
	// run loads with the cache and checks the answer and what was read:
	// dirs node directories read of all, and exactly the objects gets.
	run := func(how string, dirs int, gets ...string) {
		t.Helper()
		s := f.load(true)
		got := jsonOf(t, f.view(s, 0, Selection{All: true}))
		if read := f.sp.takeData(); strings.Join(read, " ") != strings.Join(gets, " ") {
			t.Errorf("%s: read %q, want %q", how, read, gets)
		}
		if s.Stats.DirsRead != dirs || s.Stats.Dirs != 3+4 {
			t.Errorf("%s: read %d of %d node directories, want %d of 7", how, s.Stats.DirsRead, s.Stats.Dirs, dirs)
		}
		if w := want(); got != w {
			t.Errorf("%s: the cached answer differs:\n%s\nwant:\n%s", how, got, w)
		}
	}
	settle()
	f.view(f.load(true), 0, Selection{All: true})
	f.sp.take()
	run("nothing new", 0)
	// A refresh (report --wait) starts from the facts it holds.
	s := f.load(true)
	if err := s.Refresh(f.ctx); err != nil || s.Stats.DirsRead != 0 || s.Stats.Dirs != 7 {
		t.Errorf("a refresh with nothing new: %v, read %d of %d node directories, want 0 of 7", err, s.Stats.DirsRead, s.Stats.Dirs)
	}
	f.sp.take()

	// An identity the registry no longer has: its unread directory's
	// reports are refused as any of an unknown node id are.
	db := ids["db-1"]
	delete(f.reg.Identities, db.NodeID)
	s = f.load(true)
	v := f.view(s, 0, Selection{All: true})
	if got, w := jsonOf(t, v), want(); got != w || s.Stats.DirsRead != 0 || len(v.Refused) == 0 {
		t.Errorf("with db-1's identity gone (read %d directories), the cached answer:\n%s\nwant:\n%s", s.Stats.DirsRead, got, w)
	}
	f.reg.Identities[db.NodeID] = db
	f.view(f.load(true), 0, Selection{All: true})
	f.sp.take()

	newReport := f.reportOK(ids["laptop"], 1, 1, t0.Add(5*time.Hour))
	f.brief(ids["db-1"], 2, t0.Add(5*time.Hour), "free-root")
	newBrief := spool.BriefName(ids["db-1"].NodeID, 2)
	// 8 directories now: laptop's reports are new.
	s = f.load(true)
	if got := f.sp.takeData(); strings.Join(got, " ") != newBrief+" "+newReport {
		t.Errorf("read %q after a new report and briefing, want only them", got)
	}
	if s.Stats.DirsRead != 2 || s.Stats.Dirs != 8 {
		t.Errorf("read %d of %d node directories after a new report and briefing, want 2 of 8", s.Stats.DirsRead, s.Stats.Dirs)
	}

	// A report copied in, and the directory's times set back.
	settle()
	f.view(f.load(true), 0, Selection{All: true})
	f.sp.take()
	dir := filepath.Join(f.dir, "spool", "report", ids["web-2"].NodeID)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	copied := f.reportOK(ids["web-2"], 1, 2, t0.Add(6*time.Hour))
	if err := os.Chtimes(dir, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	s = f.load(true)
	if got := f.sp.takeData(); strings.Join(got, " ") != copied {
		t.Errorf("read %q after a report was copied in keeping the directory's times, want %s", got, copied)
	}
	if s.Stats.DirsRead != 1 {
		t.Errorf("read %d node directories after one changed, want 1", s.Stats.DirsRead)
	}
}
