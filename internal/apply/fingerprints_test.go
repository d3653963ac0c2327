package apply_test

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/apply"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/resource"
)

// settled runs apply with its clock an hour ahead, so that every file the
// test wrote counts as settled and can be fingerprinted.
func settled(o *apply.Options) { o.Now = func() time.Time { return time.Now().Add(time.Hour) } }

func readFingerprints(t *testing.T, h *testHost) []resource.Fingerprint {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(h.state, apply.FingerprintFile))
	if err != nil {
		t.Fatal(err)
	}
	fps, err := resource.DecodeFingerprints(data)
	if err != nil {
		t.Fatal(err)
	}
	return fps
}

// A run keeps fingerprints of the files it verified; a no-op run does not
// rewrite them; a forged fingerprint cannot make a line ok, and the next run
// repairs the file; a damaged fingerprints file is ignored.
func TestFingerprintsAcrossRuns(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(siteFiles)
	f.mustApply(h, settled)
	fps := readFingerprints(t, h)
	var paths []string
	for _, fp := range fps {
		paths = append(paths, fp.Path)
	}
	if strings.Join(paths, " ") != "/etc/motd /srv/app/app.conf" {
		t.Fatalf("fingerprinted %q, want the two declared files", paths)
	}
	fpPath := filepath.Join(h.state, apply.FingerprintFile)
	before, _ := os.Stat(fpPath)
	if res := f.mustApply(h, settled); res.Unchanged != 4 || res.Changed+res.Failed != 0 {
		t.Fatalf("no-op: %d unchanged, %d changed, %d failed", res.Unchanged, res.Changed, res.Failed)
	}
	if after, _ := os.Stat(fpPath); !os.SameFile(before, after) {
		t.Error("a no-op run rewrote the fingerprints")
	}

	// The file is rewritten behind a fingerprint forged to match it.
	conf := filepath.Join(h.root, "srv/app/app.conf")
	writeFile(t, conf, "listen = 9090\n") // as long as the declared content
	var st syscall.Stat_t
	if err := syscall.Lstat(conf, &st); err != nil {
		t.Fatal(err)
	}
	fps[1] = resource.Fingerprint{Path: "/srv/app/app.conf", Dev: st.Dev, Ino: st.Ino, Size: st.Size,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Digest: sha256.Sum256([]byte("listen = 8080\n"))}
	if err := os.WriteFile(fpPath, resource.EncodeFingerprints(fps), 0o600); err != nil {
		t.Fatal(err)
	}
	res := f.mustApply(h, settled)
	if res.Failed != 1 {
		t.Fatalf("forged fingerprint: %d failed, want 1", res.Failed)
	}
	if l := lineOf(t, res.Report, "file:/srv/app/app.conf"); l.Status != outcome.Failed || !strings.HasPrefix(l.Detail, "read back: content digest") {
		t.Errorf("line %s %q, want failed by its read-back", l.Status, l.Detail)
	}
	res = f.mustApply(h, settled)
	if res.Changed != 1 || res.Failed != 0 || readFile(t, conf) != "listen = 8080\n" {
		t.Fatalf("next run: %d changed, %d failed, content %q; want the file repaired", res.Changed, res.Failed, readFile(t, conf))
	}

	// Damaged, the fingerprints file is ignored and every file read.
	writeFile(t, conf, "listen = 7070\n")
	data, err := os.ReadFile(fpPath)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(fpPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if res := f.mustApply(h, settled); res.Changed != 1 || res.Failed != 0 || readFile(t, conf) != "listen = 8080\n" {
		t.Fatalf("damaged fingerprints: %d changed, %d failed; want the drift repaired", res.Changed, res.Failed)
	}
	readFingerprints(t, h) // written whole again
}

// A run that stages files notes it in the state directory until it ends; a
// run that finds the note (its predecessor was killed) removes the temp
// files left beside the declared files, and only those.
func TestStagingNoteSweepsWhatAKilledRunLeft(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(siteFiles)
	var noted bool
	f.mustApply(h, func(o *apply.Options) {
		// The note exists while the run stages: seen from the clock,
		// which the read-back reads after the change phase.
		now := o.Now
		o.Now = func() time.Time {
			if _, err := os.Stat(filepath.Join(h.state, "staging")); err == nil {
				noted = true
			}
			return now()
		}
	})
	if !noted {
		t.Error("no staging note while the first run staged its files")
	}
	if _, err := os.Stat(filepath.Join(h.state, "staging")); !os.IsNotExist(err) {
		t.Fatalf("staging note left after the run: %v", err)
	}

	dir := filepath.Join(h.root, "srv/app")
	left := filepath.Join(dir, ".muster-tmp-app.conf-0123456789abcdef")
	other := filepath.Join(dir, ".muster-tmp-notes.txt-0123456789abcdef")
	writeFile(t, left, "half written")
	writeFile(t, other, "not muster's to sweep: notes.txt is not declared")
	f.mustApply(h)
	if _, err := os.Stat(left); err != nil {
		t.Fatalf("without a staging note a run swept %s: %v", left, err)
	}
	writeFile(t, filepath.Join(h.state, "staging"), "")
	if res := f.mustApply(h); res.Failed != 0 {
		t.Fatalf("%d lines failed", res.Failed)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("%s survived the run after a killed one: %v", left, err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("the temp file of an undeclared name was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.state, "staging")); !os.IsNotExist(err) {
		t.Errorf("staging note left after the sweeping run: %v", err)
	}
}
