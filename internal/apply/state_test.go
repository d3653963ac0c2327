package apply_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/apply"
	"github.com/muster-tool/muster/internal/declare"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/spool"
)

// unwritable makes dir refuse every write, even by root, until the test
// ends: a read-only bind mount where mounting is allowed, else the
// immutable attribute, else (neither is possible in some containers) dir is
// replaced by a file, which fails every write below it too.
func unwritable(t *testing.T, dir string) {
	t.Helper()
	if exec.Command("mount", "--bind", dir, dir).Run() == nil {
		if exec.Command("mount", "-o", "remount,bind,ro", dir).Run() == nil {
			t.Cleanup(func() { exec.Command("umount", dir).Run() })
			return
		}
		exec.Command("umount", dir).Run()
	}
	if exec.Command("chattr", "+i", dir).Run() == nil {
		t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })
		return
	}
	aside := dir + ".aside"
	if err := os.Rename(dir, aside); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "not a directory\n")
	t.Cleanup(func() {
		os.Remove(dir)
		os.Rename(aside, dir)
	})
}

func outbox(t *testing.T, h *testHost) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(h.state, "outbox"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// A spool that cannot be written keeps the reports in the outbox, and the
// next run sends them first: nothing is lost.
func TestUnwritableSpoolKeepsReportsInOutbox(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(siteFiles)
	f.mustApply(h)
	nodeDir := filepath.Join(f.spool, "report", f.options(h).Identity.NodeID())

	// The subtest's cleanup makes the spool writable again.
	if !t.Run("unwritable", func(t *testing.T) {
		unwritable(t, nodeDir)
		// A no-op and a run that repairs drift: both reports wait.
		res := f.mustApply(h)
		if res.Sent || res.SendError == nil {
			t.Fatalf("no-op apply against an unwritable spool: sent %v, error %v", res.Sent, res.SendError)
		}
		writeFile(t, filepath.Join(h.root, "etc/motd"), "drift\n")
		res = f.mustApply(h)
		if res.Sent || res.Changed != 1 {
			t.Fatalf("drift repair against an unwritable spool: sent %v, %d changed", res.Sent, res.Changed)
		}
		if got := readFile(t, filepath.Join(h.root, "etc/motd")); got != "managed by muster\n" {
			t.Errorf("an unwritable spool stopped the repair: motd %q", got)
		}
		if n := len(outbox(t, h)); n != 2 {
			t.Fatalf("outbox holds %d reports, want 2", n)
		}
	}) {
		t.FailNow()
	}
	if n := len(f.reports(h)); n != 1 {
		t.Fatalf("spool holds %d reports while unwritable, want the first one only", n)
	}

	res := f.mustApply(h)
	if !res.Sent || res.Flushed != 2 {
		t.Fatalf("apply with the spool back: sent %v, flushed %d; want sent and the 2 waiting reports first", res.Sent, res.Flushed)
	}
	if n := len(outbox(t, h)); n != 0 {
		t.Errorf("outbox still holds %d reports", n)
	}
	reps := f.reports(h)
	if len(reps) != 4 {
		t.Fatalf("spool holds %d reports, want 4", len(reps))
	}
	if l := lineOf(t, reps[2], "file:/etc/motd"); l.Status != outcome.Changed {
		t.Errorf("the report of the drift repair, sent late, says %s for motd", l.Status)
	}
}

// A state file that exists but is corrupt stops apply before it changes
// anything, names the file and says how to recover; it is never reset to
// generation 0, which would reopen rollback.
func TestCorruptStateFailsClosed(t *testing.T) {
	cases := []struct {
		name, file, content string
	}{
		{"garbage state", "state.toml", "generation = \x00\x01\n"},
		{"empty state", "state.toml", ""},
		{"state from the future", "state.toml", "version = 99\ngeneration = 1\n"},
		{"unknown key", "state.toml", "version = 1\ngeneration = 1\nrollback_ok = true\n"},
		{"ledger cut short", "ledger.tsv", "# muster ledger 1: what this host owns; written by muster apply, see muster-apply(1)\nfile\t/etc/mo"},
		{"ledger from the future", "ledger.tsv", "# muster ledger 2: what this host owns\n"},
		{"ledger line without a path", "ledger.tsv", "# muster ledger 1: what this host owns; written by muster apply, see muster-apply(1)\nfile\t\tcreated\t-\n"},
		{"ledger of an unknown type", "ledger.tsv", "# muster ledger 1: what this host owns; written by muster apply, see muster-apply(1)\nmount\t/mnt\t-\t-\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			h := f.enrol("web-1")
			f.declare(siteFiles)
			f.mustApply(h)
			path := filepath.Join(h.state, c.file)
			writeFile(t, path, c.content)
			f.declare(siteFiles + "\n[role.all.file.\"/etc/new\"]\ncontent = \"new\\n\"\n")

			_, err := f.apply(h)
			if err == nil {
				t.Fatal("apply with a corrupt state file succeeded")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "corrupt") {
				t.Errorf("error %q does not name %s as corrupt", err, path)
			}
			if hint := fault.HintOf(err); !strings.Contains(hint, "mv "+path) || !strings.Contains(hint, "muster-apply(1)") {
				t.Errorf("hint %q does not give the documented recovery", hint)
			}
			if got := readFile(t, path); got != c.content {
				t.Errorf("apply rewrote the corrupt file: %q", got)
			}
			if _, err := os.Lstat(filepath.Join(h.root, "etc/new")); !errors.Is(err, fs.ErrNotExist) {
				t.Error("apply changed the system despite the corrupt state file")
			}
			if n := len(f.reports(h)); n != 1 {
				t.Errorf("%d reports, want only the first", n)
			}

			// The documented recovery: move the file away, run again.
			if err := os.Rename(path, path+".bad"); err != nil {
				t.Fatal(err)
			}
			res := f.mustApply(h)
			if res.Generation != 2 || res.Failed != 0 || res.Changed != 1 {
				t.Errorf("after moving %s away: generation %d, %d changed, %d failed", c.file, res.Generation, res.Changed, res.Failed)
			}
		})
	}
}

// A host rebuilt with no state (only its keys are kept) starts from the
// newest committed generation, and the recovery copy in the declaration
// rebuilds its ledger first, so the orphans its old state knew of are
// still removed.
func TestRebuiltHostUsesRecoveryCopy(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(everyNode + `
[role.all.file."/etc/old-tool.conf"]
content = "old\n"

[role.all.file."/etc/motd"]
content = "hello\n"
`)
	f.mustApply(h)
	reps := f.reports(h)
	last := reps[len(reps)-1]

	// The disk is rebuilt from an image that still has the old files, and
	// the state directory keeps only the keys.
	ents, err := os.ReadDir(h.state)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		switch e.Name() {
		case "host.age", "host.sign", "mesh.pub":
		default:
			if err := os.RemoveAll(filepath.Join(h.state, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The mesh holds the ledger of the last report as the recovery copy;
	// generation 2 no longer names old-tool.conf.
	f.recovery = map[string]declare.Recovery{"web-1": {NodeID: last.NodeID, Ledger: last.Ledger}}
	gen := f.declare(everyNode + `
[role.all.file."/etc/motd"]
content = "hello\n"
`)
	res := f.mustApply(h)
	if res.Generation != gen {
		t.Fatalf("rebuilt host applied generation %d, want the newest, %d", res.Generation, gen)
	}
	if _, err := os.Lstat(filepath.Join(h.root, "etc/old-tool.conf")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the orphan known only from the recovery copy was stranded")
	}
	if l := lineOf(t, res.Report, "file:/etc/old-tool.conf"); l.Status != outcome.Removed {
		t.Errorf("orphan line %s %q", l.Status, l.Detail)
	}
	if len(res.Report.Notes) < 2 || !strings.Contains(res.Report.Notes[0], "recovery copy") || !strings.Contains(res.Report.Notes[1], "started without state") {
		t.Errorf("report notes %q, want one saying the ledger came from the recovery copy and one that the host started without state", res.Report.Notes)
	}
	// The ledger is the host's own again: the next run does not need the
	// recovery copy and says nothing more.
	res = f.mustApply(h)
	if len(res.Report.Notes) != 0 || res.Removed != 0 || res.Changed != 0 {
		t.Errorf("next run: notes %q, %d removed, %d changed", res.Report.Notes, res.Removed, res.Changed)
	}
}

// A host that lost all state and has no recovery copy starts from the
// newest generation: it is not refused, and it applies everything.
func TestHostWithoutStateStartsFromNewest(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(siteFiles)
	gen := f.declare(siteFiles + "\n[role.all.file.\"/etc/new\"]\ncontent = \"new\\n\"\n")
	res := f.mustApply(h)
	if res.Generation != gen || res.Changed != 5 || res.Failed != 0 {
		t.Fatalf("first apply of a host without state: generation %d, %d changed, %d failed", res.Generation, res.Changed, res.Failed)
	}
}

// unmounting is the fixture's directory spool seen by a host whose mount
// of it goes away right after the run read its declaration: the spool
// directory is swapped for an empty one, as an unmounted stick or bind
// mount leaves its mount point.
type unmounting struct {
	*spool.Dir
	t         *testing.T
	aside     string
	unmounted bool
}

func (u *unmounting) Get(ctx context.Context, name string, max int64) ([]byte, error) {
	data, err := u.Dir.Get(ctx, name, max)
	if strings.HasPrefix(name, spool.DeclPrefix) && !u.unmounted {
		u.unmounted = true
		if err := os.Rename(u.Path(), u.aside); err != nil {
			u.t.Fatal(err)
		}
		if err := os.Mkdir(u.Path(), 0o755); err != nil {
			u.t.Fatal(err)
		}
	}
	return data, err
}

// The story: a host's spool is a bind mount (or a stick) that goes away in
// the middle of a run. The run does its work, keeps its report in the
// outbox and says it is a temporary failure; it never writes the report
// into the empty mount point, where the mesh would never see it. Runs
// while the spool is away leave the outbox alone, and the first run once
// it is back sends the report.
func TestSpoolGoneKeepsReportInOutbox(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(siteFiles)
	f.mustApply(h)
	gen := f.declare(strings.Replace(siteFiles, "listen = 8080", "listen = 8081", 1))
	aside := filepath.Join(t.TempDir(), "spool")
	res := f.mustApply(h, func(o *apply.Options) {
		o.Spool = &unmounting{Dir: o.Spool.(*spool.Dir), t: t, aside: aside}
	})
	if res.Generation != gen || res.Changed != 1 {
		t.Fatalf("the run the spool went away in: generation %d, %d changed; want generation %d applied, 1 changed", res.Generation, res.Changed, gen)
	}
	if res.Sent || !errors.Is(res.SendError, spool.ErrUnavailable) || !strings.Contains(res.SendError.Error(), "holds no mesh keys") {
		t.Fatalf("the run the spool went away in: sent %v, error %v; want its report kept, the spool named unavailable", res.Sent, res.SendError)
	}
	if n := len(outbox(t, h)); n != 1 {
		t.Fatalf("outbox holds %d reports, want the run's report", n)
	}
	empty := func() {
		t.Helper()
		if ents, _ := os.ReadDir(f.spool); len(ents) != 0 {
			t.Fatalf("the empty mount point was written to: it holds %s", ents[0].Name())
		}
	}
	empty()

	// Away: the run is a temporary failure and the report stays put.
	_, err := f.apply(h)
	if fault.ClassOf(err) != fault.Temporary || !strings.Contains(err.Error(), "holds no mesh keys") {
		t.Fatalf("apply with the spool away: %v (class %v), want a temporary failure", err, fault.ClassOf(err))
	}
	if n := len(outbox(t, h)); n != 1 {
		t.Fatalf("with the spool away, the outbox holds %d reports, want 1", n)
	}
	empty()

	// Back.
	if err := os.Remove(f.spool); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(aside, f.spool); err != nil {
		t.Fatal(err)
	}
	res = f.mustApply(h)
	if !res.Sent || res.Flushed != 1 {
		t.Fatalf("apply with the spool back: sent %v, flushed %d; want the waiting report sent first", res.Sent, res.Flushed)
	}
	reps := f.reports(h)
	if len(reps) != 3 || reps[1].Generation != gen || lineOf(t, reps[1], "file:/srv/app/app.conf").Status != outcome.Changed {
		t.Fatalf("the spool holds %d reports; want 3, the second saying app.conf changed in generation %d", len(reps), gen)
	}
}

// A host enrolled before the signing key's public half was kept beside it
// gets the file from its first real run; a dry run, which writes no
// state, does not write it.
func TestRealRunKeepsThePublicKey(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(everyNode + "[role.all.file.\"/etc/motd\"]\ncontent = \"hi\\n\"\n")
	pub := filepath.Join(h.state, "host.sign.pub")
	if err := os.Remove(pub); err != nil {
		t.Fatalf("the join left no public-key file: %v", err)
	}
	if _, err := f.apply(h, func(o *apply.Options) { o.DryRun = true }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pub); err == nil {
		t.Error("a dry run wrote the public-key file")
	}
	f.mustApply(h)
	if _, err := os.Stat(pub); err != nil {
		t.Errorf("a real run did not keep the public key: %v", err)
	}
}
