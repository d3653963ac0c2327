package apply_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/muster-tool/muster/internal/apply"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/report"
)

// lstat returns the mode bits, owner and group of path, not following a
// symlink.
func lstat(t *testing.T, path string) (perm os.FileMode, uid, gid int) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fi.Mode().Perm(), int(st.Uid), int(st.Gid)
}

func lineOf(t *testing.T, rep *report.Report, id string) outcome.Line {
	t.Helper()
	for _, l := range rep.Lines {
		if l.ID == id {
			return l
		}
	}
	t.Fatalf("report has no line %s; lines: %v", id, rep.Lines)
	return outcome.Line{}
}

const siteFiles = everyNode + `
[role.all.directory."/srv/app"]
mode = "0750"
owner = "app"
group = "app"

[role.all.file."/srv/app/app.conf"]
content = "listen = 8080\n"
mode = "0640"
owner = "root"
group = "app"

[role.all.symlink."/srv/app/current"]
target = "app.conf"

[role.all.file."/etc/motd"]
content = "managed by muster\n"
`

// The first apply creates files, directories and symlinks with their
// modes, owners and groups (looked up in the root's own user database),
// reports every line as changed and verified, and the next apply changes
// nothing.
func TestFirstApplyThenNoOp(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	gen := f.declare(siteFiles)

	res := f.mustApply(h)
	if res.Generation != gen || res.Changed != 4 || res.Failed != 0 || !res.Sent {
		t.Fatalf("first apply: generation %d, %d changed, %d failed, sent %v; want generation %d, 4 changed, sent", res.Generation, res.Changed, res.Failed, res.Sent, gen)
	}
	if perm, uid, gid := lstat(t, filepath.Join(h.root, "srv/app")); perm != 0o750 || uid != 1234 || gid != 1234 {
		t.Errorf("/srv/app: %o %d:%d, want 750 1234:1234", perm, uid, gid)
	}
	if perm, uid, gid := lstat(t, filepath.Join(h.root, "srv/app/app.conf")); perm != 0o640 || uid != 0 || gid != 1234 {
		t.Errorf("/srv/app/app.conf: %o %d:%d, want 640 0:1234", perm, uid, gid)
	}
	if got := readFile(t, filepath.Join(h.root, "srv/app/app.conf")); got != "listen = 8080\n" {
		t.Errorf("app.conf holds %q", got)
	}
	if target, err := os.Readlink(filepath.Join(h.root, "srv/app/current")); err != nil || target != "app.conf" {
		t.Errorf("symlink current -> %q, %v; want app.conf", target, err)
	}
	if perm, _, _ := lstat(t, filepath.Join(h.root, "etc/motd")); perm != 0o644 {
		t.Errorf("/etc/motd created with mode %o, want the default 644", perm)
	}

	reps := f.reports(h)
	if len(reps) != 1 {
		t.Fatalf("%d reports in the spool, want 1", len(reps))
	}
	rep := reps[0]
	if rep.Generation != gen || rep.Outcome() != outcome.Passed || len(rep.Lines) != 4 || len(rep.Ledger) != 4 {
		t.Fatalf("report: generation %d, outcome %s, %d lines, %d ledger entries", rep.Generation, rep.Outcome(), len(rep.Lines), len(rep.Ledger))
	}
	for _, l := range rep.Lines {
		if l.Status != outcome.Changed || !strings.HasPrefix(l.Digest, "sha256:") {
			t.Errorf("line %s: status %s, digest %q; want changed with the verified digest", l.ID, l.Status, l.Digest)
		}
	}
	for _, e := range rep.Ledger {
		if !e.Created {
			t.Errorf("ledger entry %s not marked created by muster", e.ID)
		}
	}

	res = f.mustApply(h)
	if res.Changed != 0 || res.Unchanged != 4 || res.Failed != 0 || !res.Sent {
		t.Fatalf("second apply: %d changed, %d unchanged, %d failed; want a no-op verifying 4", res.Changed, res.Unchanged, res.Failed)
	}
	reps = f.reports(h)
	if len(reps) != 2 {
		t.Fatalf("%d reports after the no-op, want 2: every run reports", len(reps))
	}
	for _, l := range reps[1].Lines {
		if l.Status != outcome.OK || l.Digest != lineOf(t, rep, l.ID).Digest {
			t.Errorf("no-op line %s: %s %s; want ok with the same digest as before", l.ID, l.Status, l.Digest)
		}
	}
}

// Drift is repaired by re-applying the same generation, and owner and
// group changes in a new generation reach the file system.
func TestDriftRepairAndOwnerChange(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(siteFiles)
	f.mustApply(h)

	conf := filepath.Join(h.root, "srv/app/app.conf")
	writeFile(t, conf, "edited by hand\n")
	if err := os.Chown(filepath.Join(h.root, "srv/app"), 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(h.root, "srv/app"), 0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(h.root, "srv/app/current")
	os.Remove(link)
	if err := os.Symlink("/etc/shadow", link); err != nil {
		t.Fatal(err)
	}

	res := f.mustApply(h)
	if res.Changed != 3 || res.Unchanged != 1 || res.Failed != 0 {
		t.Fatalf("drift repair: %d changed, %d unchanged, %d failed; want 3 changed, 1 unchanged", res.Changed, res.Unchanged, res.Failed)
	}
	if got := readFile(t, conf); got != "listen = 8080\n" {
		t.Errorf("app.conf after repair: %q", got)
	}
	if perm, uid, gid := lstat(t, filepath.Join(h.root, "srv/app")); perm != 0o750 || uid != 1234 || gid != 1234 {
		t.Errorf("/srv/app after repair: %o %d:%d, want 750 1234:1234", perm, uid, gid)
	}
	if target, _ := os.Readlink(link); target != "app.conf" {
		t.Errorf("symlink after repair -> %q", target)
	}
	if l := lineOf(t, res.Report, "file:/srv/app/app.conf"); l.Status != outcome.Changed || strings.Contains(l.Detail, "listen") || strings.Contains(l.Detail, "edited") {
		t.Errorf("app.conf line %s %q: want changed, with no content in the detail", l.Status, l.Detail)
	}

	// A new generation changes only ownership: app.conf is handed to
	// app:staff.
	gen := f.declare(strings.Replace(strings.Replace(siteFiles, `owner = "root"`, `owner = "app"`, 1), `group = "app"

[role.all.symlink`, `group = "staff"

[role.all.symlink`, 1))
	res = f.mustApply(h)
	if res.Generation != gen || res.Changed != 1 || res.Failed != 0 {
		t.Fatalf("ownership change: generation %d, %d changed, %d failed; lines %v", res.Generation, res.Changed, res.Failed, res.Report.Lines)
	}
	if perm, uid, gid := lstat(t, conf); perm != 0o640 || uid != 1234 || gid != 50 {
		t.Errorf("app.conf: %o %d:%d, want 640 1234:50", perm, uid, gid)
	}
	if got := readFile(t, conf); got != "listen = 8080\n" {
		t.Errorf("app.conf content after an ownership change: %q", got)
	}
}

// A line that fails makes the report's outcome failed; it is sent like any
// other report.
func TestFailedLineFailsReport(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	// /etc/motd is a directory on the host: muster never replaces a
	// directory by a file.
	if err := os.MkdirAll(filepath.Join(h.root, "etc/motd"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.declare(siteFiles)
	res := f.mustApply(h)
	if res.Failed != 1 || res.Changed != 3 || !res.Sent {
		t.Fatalf("%d failed, %d changed, sent %v; want 1 failed, 3 changed, sent", res.Failed, res.Changed, res.Sent)
	}
	l := lineOf(t, res.Report, "file:/etc/motd")
	if l.Status != outcome.Failed || l.Detail == "" || l.Digest != "" {
		t.Errorf("motd line: %s %q digest %q; want failed with a reason and no digest", l.Status, l.Detail, l.Digest)
	}
	reps := f.reports(h)
	if len(reps) != 1 || reps[0].Outcome() != outcome.Failing {
		t.Fatalf("report in the spool: %d reports, outcome %v; want 1, failed", len(reps), reps[0].Outcome())
	}
	for _, e := range reps[0].Ledger {
		if e.ID == "file:/etc/motd" {
			t.Errorf("ledger owns %s, which failed and was never created", e.ID)
		}
	}
}

// Orphans: a resource muster created and the declaration no longer names is
// removed; one that existed before muster managed it is left and reported
// as a warn line.
func TestOrphans(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	writeFile(t, filepath.Join(h.root, "etc/issue"), "was here before muster\n")
	f.declare(everyNode + `
[role.all.file."/etc/created-by-muster"]
content = "mine\n"

[role.all.file."/etc/issue"]
content = "managed\n"

[role.all.directory."/srv/data"]

[role.all.file."/srv/data/kept"]
content = "kept\n"
`)
	res := f.mustApply(h)
	if res.Changed != 4 {
		t.Fatalf("first apply: %d changed, lines %v", res.Changed, res.Report.Lines)
	}
	f.declare(everyNode + `
[role.all.file."/srv/data/kept"]
content = "kept\n"
`)
	res = f.mustApply(h)
	if res.Failed != 0 || res.Removed != 1 || res.Warned != 1 {
		t.Fatalf("orphans: %d removed, %d warned, %d failed; lines %v", res.Removed, res.Warned, res.Failed, res.Report.Lines)
	}
	if _, err := os.Lstat(filepath.Join(h.root, "etc/created-by-muster")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("orphan muster created still there: %v", err)
	}
	if l := lineOf(t, res.Report, "file:/etc/created-by-muster"); l.Status != outcome.Removed {
		t.Errorf("line %s %q, want removed", l.Status, l.Detail)
	}
	if got := readFile(t, filepath.Join(h.root, "etc/issue")); got != "managed\n" {
		t.Errorf("/etc/issue, which muster did not create, holds %q; want it left as muster last wrote it", got)
	}
	if l := lineOf(t, res.Report, "file:/etc/issue"); l.Status != outcome.Warn || !strings.Contains(l.Detail, "did not create") {
		t.Errorf("line %s %q, want a warn line saying muster did not create it", l.Status, l.Detail)
	}
	// /srv/data still holds a declared file: it stays, owned, and goes
	// with the file.
	if l := lineOf(t, res.Report, "directory:/srv/data"); l.Status != outcome.OK {
		t.Errorf("directory /srv/data, which holds a declared file: %s %q, want ok (kept)", l.Status, l.Detail)
	}

	// Orphans are reported once: the next run has nothing to say.
	res = f.mustApply(h)
	if res.Removed != 0 || res.Warned != 0 || res.Changed != 0 || res.Failed != 0 {
		t.Errorf("run after the orphans: %d removed, %d warned, %d changed; lines %v", res.Removed, res.Warned, res.Changed, res.Report.Lines)
	}

	f.declare(everyNode + `
[role.all.file."/etc/motd"]
content = "hello\n"
`)
	res = f.mustApply(h)
	if res.Removed != 2 || res.Failed != 0 {
		t.Errorf("dropping the last file under /srv/data: %d removed, %d failed; lines %v", res.Removed, res.Failed, res.Report.Lines)
	}
	if _, err := os.Lstat(filepath.Join(h.root, "srv/data")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/srv/data still there after its last file went: %v", err)
	}
}

// A dry run shows what would change, changes nothing and writes no report
// and no state.
func TestDryRunChangesNothing(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(siteFiles)
	res := f.mustApply(h, func(o *apply.Options) { o.DryRun = true })
	if res.Changed != 4 || res.Failed != 0 {
		t.Fatalf("dry run: %d would change, %d failed; lines %v", res.Changed, res.Failed, res.Report.Lines)
	}
	for _, p := range []string{"srv/app", "etc/motd"} {
		if _, err := os.Lstat(filepath.Join(h.root, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("dry run created /%s", p)
		}
	}
	if n := len(f.reports(h)); n != 0 {
		t.Errorf("dry run wrote %d reports", n)
	}
	for _, name := range []string{"state.toml", "ledger.tsv", "outbox"} {
		if _, err := os.Stat(filepath.Join(h.state, name)); err == nil {
			t.Errorf("dry run wrote %s in the state directory", name)
		}
	}
	// And the real run after it still does everything.
	if res := f.mustApply(h); res.Changed != 4 {
		t.Errorf("apply after the dry run: %d changed, want 4", res.Changed)
	}
}

// Nothing declared for this node yet: not an error, and no report.
func TestNothingDeclared(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	res := f.mustApply(h)
	if !res.Nothing || res.Report != nil {
		t.Fatalf("apply with no generation: %+v", res)
	}
	f.enrol("db-1")
	f.declare(`[node."db-1".file."/etc/motd"]` + "\ncontent = \"db\\n\"\n")
	res = f.mustApply(h)
	if !res.Nothing || res.Newest != 1 {
		t.Fatalf("apply on a node generation 1 assigns nothing: nothing %v, newest %d", res.Nothing, res.Newest)
	}
}

// An orphaned directory muster created that now holds files muster did not
// create is left in place with a warn line, stays owned, and goes once it
// is empty: the node is never failed for it.
func TestOrphanDirectoryNotEmpty(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(everyNode + `
[role.all.directory."/srv/upload"]

[role.all.file."/etc/motd"]
content = "hello\n"
`)
	f.mustApply(h)
	photo := filepath.Join(h.root, "srv/upload/photo.jpg")
	writeFile(t, photo, "a user's file\n")
	f.declare(everyNode + `
[role.all.file."/etc/motd"]
content = "hello\n"
`)
	for range 2 {
		res := f.mustApply(h)
		if res.Failed != 0 || res.Warned != 1 {
			t.Fatalf("%d failed, %d warned; lines %v", res.Failed, res.Warned, res.Report.Lines)
		}
		l := lineOf(t, res.Report, "directory:/srv/upload")
		if l.Status != outcome.Warn || l.Detail != "orphan: directory /srv/upload is not empty; left in place until it is" {
			t.Errorf("line %s %q", l.Status, l.Detail)
		}
		if got := readFile(t, photo); got != "a user's file\n" {
			t.Errorf("the user's file holds %q", got)
		}
	}
	if err := os.Remove(photo); err != nil {
		t.Fatal(err)
	}
	res := f.mustApply(h)
	if res.Removed != 1 || res.Failed != 0 || res.Warned != 0 {
		t.Fatalf("once empty: %d removed, %d failed, %d warned; lines %v", res.Removed, res.Failed, res.Warned, res.Report.Lines)
	}
	if _, err := os.Lstat(filepath.Join(h.root, "srv/upload")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/srv/upload still there once empty: %v", err)
	}
}
