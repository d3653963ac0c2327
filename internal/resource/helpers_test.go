package resource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/outcome"
)

// Users and groups of the test root's etc/passwd and etc/group; they do not
// exist on the machine running the tests, so resolving them proves that
// names come from the root.
const (
	aliceUID = 4101
	bobUID   = 4102
	webGID   = 4201
	opsGID   = 4202
)

func newRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	write(t, root, "/etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"+
		"muster-alice:x:4101:4201::/home/alice:/bin/sh\n"+
		"muster-bob:x:4102:4202::/home/bob:/bin/sh\n")
	write(t, root, "/etc/group", "root:x:0:\nmuster-web:x:4201:\nmuster-ops:x:4202:muster-bob\n")
	return root
}

func write(t *testing.T, root, p, content string) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, root, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func lstat(t *testing.T, root, p string) (fs.FileInfo, *syscall.Stat_t) {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(root, p))
	if err != nil {
		t.Fatal(err)
	}
	return fi, fi.Sys().(*syscall.Stat_t)
}

func exists(root, p string) bool {
	_, err := os.Lstat(filepath.Join(root, p))
	return err == nil
}

func apply(t *testing.T, s *System, specs ...Spec) map[string]Result {
	t.Helper()
	res := s.Apply(context.Background(), specs)
	checkNoRare(t)
	if len(res) != len(specs) {
		t.Fatalf("%d results for %d specs", len(res), len(specs))
	}
	m := map[string]Result{}
	for i, r := range res {
		if r.ID != specs[i].ID() {
			t.Fatalf("result %d is %s, want %s (input order)", i, r.ID, specs[i].ID())
		}
		m[r.ID] = r
	}
	return m
}

func wantStatus(t *testing.T, res map[string]Result, id string, want outcome.Status) Result {
	t.Helper()
	r, ok := res[id]
	if !ok {
		t.Fatalf("no result for %s", id)
	}
	if r.Status != want {
		t.Errorf("%s: status %s (%q), want %s", id, r.Status, r.Detail, want)
	}
	if r.Status == outcome.Failed && r.Digest != "" {
		t.Errorf("%s: failed line carries digest %s", id, r.Digest)
	}
	dry := strings.HasPrefix(r.Detail, "would ")
	// Warn lines say what was left alone; they vouch for no state.
	if r.Status != outcome.Failed && r.Status != outcome.Removed && r.Status != outcome.Warn && !dry && !strings.HasPrefix(r.Digest, "sha256:") {
		t.Errorf("%s: verified line has digest %q", id, r.Digest)
	}
	return r
}

func file(p, content string) Spec { return Spec{Kind: File, Path: p, Content: content} }

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// snapshot describes every entry under root: type, mode, owner, size,
// content digest, link target and mtime, to prove a run changed nothing.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		line := p + " " + fi.Mode().String() + " " + strconv.Itoa(int(st.Uid)) + ":" + strconv.Itoa(int(st.Gid)) + " " + fi.ModTime().Format(time.RFC3339Nano) + " " + strconv.Itoa(int(st.Ino))
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			line += " " + sha(string(b))
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func noTemps(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && atomicfile.IsTemp(d.Name()) {
			t.Errorf("temp file left behind: %s", p)
		}
		return nil
	})
}

func ptr(b bool) *bool { return &b }

// checkNoRare fails the test when anything wrote to noRare, the rare
// every item without its own reads: a write through item.get instead of
// item.set would show on every item of every run after it.
func checkNoRare(t testing.TB) {
	t.Helper()
	if !reflect.ValueOf(noRare).IsZero() {
		t.Fatalf("noRare was written: %+v", noRare)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if !reflect.ValueOf(noRare).IsZero() {
		fmt.Fprintf(os.Stderr, "noRare was written: %+v\n", noRare)
		code = 1
	}
	os.Exit(code)
}

// An item is within 384 bytes, a size class of Go's allocator: a host of
// 100,000 files holds 100,000 of them through its change and read-back
// phases, and the README's peak memory of apply counts on it. A field
// few items need belongs in rare.
func TestItemFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(item{}); n > 384 {
		t.Errorf("item is %d bytes, over 384", n)
	}
}
