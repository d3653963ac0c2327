package declare

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/spool"
)

// mount mounts, or skips the test where this user may not (the tests
// that need it run as root in CI), and unmounts when the test ends.
func mount(t *testing.T, source, target, fstype string, flags uintptr, data string) {
	t.Helper()
	if err := syscall.Mount(source, target, fstype, flags, data); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Skipf("cannot mount here (%v): run as root to test an unwritable spool", err)
		}
		t.Fatalf("mount %s on %s: %v", source, target, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(target, 0); err != nil {
			t.Errorf("unmount %s: %v", target, err)
		}
	})
}

// readOnly makes dir read-only with a read-only bind mount over itself:
// unlike a chmod, it stops root too.
func readOnly(t *testing.T, dir string) {
	t.Helper()
	mount(t, dir, dir, "", syscall.MS_BIND, "")
	// The remount changes the bind mount above; its cleanup undoes both.
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", dir, err)
	}
}

func TestReadOnlySpoolIsATemporaryFailure(t *testing.T) {
	f := newFixture(t)
	f.enrol("web-1", nil)
	f.mustDeclare(f.parse(webSite, nil), Options{})
	dir := filepath.Join(f.dir, "spool")
	before := files(t, dir)
	readOnly(t, dir)
	_, err := f.declare(f.parse(markedSite("new"), nil), Options{})
	if fault.ClassOf(err) != fault.Temporary || !errors.Is(err, spool.ErrUnavailable) {
		t.Fatalf("err = %v (class %v), want a temporary failure", err, fault.ClassOf(err))
	}
	if !strings.Contains(err.Error(), "nothing was committed") || fault.HintOf(err) == "" {
		t.Errorf("err = %q, hint %q: want it to say nothing was committed, with a hint", err, fault.HintOf(err))
	}
	if after := files(t, dir); !slices.Equal(before, after) {
		t.Errorf("the spool changed:\nbefore %v\nafter  %v", before, after)
	}
}

// A spool that fills up while the bundles are written: the declare fails
// temporarily, generation 2 is never committed, and the newest committed
// generation is still 1, the one nodes go on applying.
func TestFullSpoolCommitsNothing(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	tmp := t.TempDir()
	mount(t, "tmpfs", tmp, "tmpfs", 0, "size=512k")
	f := newFixtureIn(t, tmp)
	var nodes []string
	for i := range 20 {
		n := "web-" + string(rune('a'+i))
		f.enrol(n, nil)
		nodes = append(nodes, n)
	}
	f.mustDeclare(f.parse(webSite, nil), Options{})
	// Content that does not compress: each bundle takes 48 KiB, and
	// twenty of them do not fit.
	noise := make([]byte, 24<<10)
	rand.Read(noise)
	big := webSite + "\n[role.web.file.\"/etc/noise\"]\ncontent = \"" + hex.EncodeToString(noise) + "\"\n"
	_, err := f.declare(f.parse(big, nil), Options{})
	if fault.ClassOf(err) != fault.Temporary || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err = %v (class %v), want a temporary failure: no space", err, fault.ClassOf(err))
	}
	if gens := committed(f); !slices.Equal(gens, []uint64{1}) {
		t.Errorf("committed %v, want [1]", gens)
	}
	if _, err := f.m.Spool.Stat(f.ctx, spool.CommitName(2)); !errors.Is(err, spool.ErrNotFound) {
		t.Errorf("commit of generation 2: %v", err)
	}
	written := withPrefix(f.objects(), spool.DeclPrefix+spool.GenerationName(2)+"/")
	t.Logf("%d of %d bundles of generation 2 were written before the spool filled up; no commit names them", len(written), len(nodes))
	checkGenerations(t, f, nodes)
	// Once there is room again, declare commits generation 2 whole.
	if err := os.RemoveAll(filepath.Join(tmp, "spool", "decl", spool.GenerationName(2))); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(tmp, "spool", "manifest", spool.GenerationName(2))); err != nil {
		t.Fatal(err)
	}
	res := f.mustDeclare(f.parse(markedSite("after"), nil), Options{})
	if res.Generation != 2 {
		t.Errorf("generation %d, want 2", res.Generation)
	}
	checkGenerations(t, f, nodes)
}
