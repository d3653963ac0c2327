package resource

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/outcome"
)

// later is a clock far enough ahead that every file of a test has settled.
func later() time.Time { return time.Now().Add(time.Hour) }

// forged returns a fingerprint of the file at p as it is now, claiming the
// digest of content: what a fingerprint left behind by a rewrite that kept
// every timestamp would say.
func forged(t *testing.T, root, p, content string) Fingerprint {
	t.Helper()
	_, st := lstat(t, root, p)
	return Fingerprint{Path: p, Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Digest: sha256.Sum256([]byte(content))}
}

// A fingerprint spares the first look at a file, never its read-back: a file
// that a wrong fingerprint vouches for is not rewritten, its read-back fails
// the line, and the next run, which has no fingerprint for it, repairs it.
func TestFingerprintNeverVouchesForALine(t *testing.T) {
	spec := file("/etc/app.conf", "good\n")
	for _, withFingerprint := range []bool{false, true} {
		root := newRoot(t)
		write(t, root, "/etc/app.conf", "bad!\n") // same size as declared
		s := &System{Root: root, Now: later}
		if withFingerprint {
			s.Known = []Fingerprint{forged(t, root, "/etc/app.conf", "good\n")}
		}
		res := apply(t, s, spec)
		if !withFingerprint {
			// Control: without the fingerprint the same file is repaired.
			wantStatus(t, res, spec.ID(), outcome.Changed)
			continue
		}
		r := wantStatus(t, res, spec.ID(), outcome.Failed)
		if !strings.HasPrefix(r.Detail, "read back: content digest") {
			t.Errorf("detail %q, want the read-back's content mismatch", r.Detail)
		}
		if got := read(t, root, "/etc/app.conf"); got != "bad!\n" {
			t.Errorf("content %q: the first look read the file instead of trusting the fingerprint", got)
		}
		next := s.Fingerprints()
		if len(next) != 0 {
			t.Fatalf("a failed line left fingerprints %+v", next)
		}
		s.Known = next
		wantStatus(t, apply(t, s, spec), spec.ID(), outcome.Changed)
		if got := read(t, root, "/etc/app.conf"); got != "good\n" {
			t.Errorf("next run left %q", got)
		}
	}
}

// A fingerprint vouches only while everything it recorded still holds.
func TestFingerprintStaleWhenFileChanged(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(*Fingerprint)
	}{
		{"status change time", func(f *Fingerprint) { f.Ctime-- }},
		{"modification time", func(f *Fingerprint) { f.Mtime++ }},
		{"inode", func(f *Fingerprint) { f.Ino++ }},
		{"device", func(f *Fingerprint) { f.Dev++ }},
		{"digest of other content", func(f *Fingerprint) { f.Digest = sha256.Sum256([]byte("other")) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := newRoot(t)
			write(t, root, "/etc/app.conf", "bad!\n")
			fp := forged(t, root, "/etc/app.conf", "good\n")
			tc.spoil(&fp)
			s := &System{Root: root, Now: later, Known: []Fingerprint{fp}}
			spec := file("/etc/app.conf", "good\n")
			wantStatus(t, apply(t, s, spec), spec.ID(), outcome.Changed)
			if got := read(t, root, "/etc/app.conf"); got != "good\n" {
				t.Errorf("content %q, want the file repaired", got)
			}
		})
	}
}

// Fingerprints come from the read-back, only for files that settled before
// it began, in declaration order; the next run uses them.
func TestFingerprintsFromReadBack(t *testing.T) {
	root := newRoot(t)
	specs := []Spec{file("/etc/b.conf", "bee\n"), {Kind: Directory, Path: "/srv"}, file("/etc/a.conf", "ay\n")}
	s := &System{Root: root}
	apply(t, s, specs...)
	if fps := s.Fingerprints(); len(fps) != 0 {
		t.Fatalf("files written just now got fingerprints %+v", fps)
	}
	s.Now = later
	apply(t, s, specs...)
	fps := s.Fingerprints()
	if len(fps) != 2 || fps[0].Path != "/etc/b.conf" || fps[1].Path != "/etc/a.conf" {
		t.Fatalf("fingerprints %+v, want b.conf then a.conf", fps)
	}
	// Taking them lets go of the run; asking again gives the same.
	if s.last != nil {
		t.Error("the run is still held after its fingerprints were taken")
	}
	if again := s.Fingerprints(); len(again) != 2 || &again[0] != &fps[0] {
		t.Errorf("asked again: %+v", again)
	}
	_, st := lstat(t, root, "/etc/b.conf")
	want := Fingerprint{Path: "/etc/b.conf", Dev: uint64(st.Dev), Ino: st.Ino, Size: 4,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Digest: sha256.Sum256([]byte("bee\n"))}
	if fps[0] != want {
		t.Errorf("fingerprint %+v, want %+v", fps[0], want)
	}
	// In a declaration that changed order, they are still found.
	write(t, root, "/etc/a.conf", "zz\n") // same size, new times: not vouched for
	s.Known = fps
	res := apply(t, s, specs[2], specs[1], specs[0])
	wantStatus(t, res, specs[2].ID(), outcome.Changed)
	wantStatus(t, res, specs[0].ID(), outcome.OK)

	// Unchanged, the fingerprints are the ones given; where one file
	// changed, only its fingerprint does.
	apply(t, s, specs...)
	s.Known = s.Fingerprints()
	apply(t, s, specs...)
	same := s.Fingerprints()
	if len(same) != 2 || &same[0] != &s.Known[0] {
		t.Errorf("unchanged fingerprints came back as a new list %+v", same)
	}
	write(t, root, "/etc/a.conf", "zz\n")
	apply(t, s, specs...)
	got := s.Fingerprints()
	_, st = lstat(t, root, "/etc/a.conf")
	if len(got) != 2 || got[0] != same[0] || got[1].Ino != st.Ino || got[1].Ctime != st.Ctim.Nano() || got[1].Digest != sha256.Sum256([]byte("ay\n")) {
		t.Errorf("after a.conf was repaired: %+v", got)
	}
}

// A dry run reads every file: what it shows does not rest on fingerprints.
func TestDryRunIgnoresFingerprints(t *testing.T) {
	root := newRoot(t)
	write(t, root, "/etc/app.conf", "bad!\n")
	s := &System{Root: root, Now: later, DryRun: true, Known: []Fingerprint{forged(t, root, "/etc/app.conf", "good\n")}}
	spec := file("/etc/app.conf", "good\n")
	r := wantStatus(t, apply(t, s, spec), spec.ID(), outcome.Changed)
	if !strings.Contains(r.Detail, "would") {
		t.Errorf("detail %q, want what would change", r.Detail)
	}
	if fps := s.Fingerprints(); fps != nil {
		t.Errorf("a dry run gave fingerprints %+v", fps)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/app.conf")); string(b) != "bad!\n" {
		t.Errorf("dry run changed the file to %q", b)
	}
}

func TestFingerprintSettle(t *testing.T) {
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	ns := func(d time.Duration) int64 { return at.Add(d).UnixNano() }
	tests := []struct {
		name         string
		mtime, ctime int64
		want         bool
	}{
		{"changed long before", ns(-time.Hour + 7), ns(-time.Hour + 7), true},
		{"changed just before", ns(-time.Millisecond + 7), ns(-time.Millisecond + 7), false},
		{"ctime just before, mtime old", ns(-time.Hour + 7), ns(-FingerprintSettle + 1), false},
		{"settled exactly", ns(-FingerprintSettle - 7), ns(-FingerprintSettle), true},
		{"mtime in the future", ns(time.Hour + 7), ns(-time.Hour + 7), false},
		// Whole seconds: a coarse filesystem, which needs longer.
		{"coarse, two seconds before", ns(-2 * time.Second), ns(-2 * time.Second), false},
		{"coarse, four seconds before", ns(-4 * time.Second), ns(-4 * time.Second), true},
		{"one time whole, the other not", ns(-2 * time.Second), ns(-2*time.Second + 7), true},
		// A filesystem that keeps no times.
		{"no times", 0, 0, false},
		{"no status-change time", ns(-time.Hour + 7), 0, false},
	}
	for _, tc := range tests {
		if got := settled(tc.mtime, tc.ctime, at); got != tc.want {
			t.Errorf("%s: settled %v, want %v", tc.name, got, tc.want)
		}
	}
}
