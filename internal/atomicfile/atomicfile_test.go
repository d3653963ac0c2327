package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplacesWholeAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("new content"), 0o640); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	if string(b) != "new content" || st.Mode().Perm() != 0o640 {
		t.Errorf("got %q mode %o", b, st.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temp files left behind: %v", ents)
	}
	// Writing into a directory that does not exist fails and leaves nothing.
	if err := WriteFile(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Error("write into a missing directory succeeded")
	}
}

func TestCreateExclusiveNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "key")
	if err := CreateExclusive(p, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CreateExclusive(p, []byte("other"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second create: %v, want ErrExist", err)
	}
	b, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	if string(b) != "secret" || st.Mode().Perm() != 0o600 {
		t.Errorf("got %q mode %o", b, st.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if IsTemp(e.Name()) {
			t.Errorf("temp file left: %s", e.Name())
		}
	}
}

// WriteCache replaces a file as WriteFile does, leaving no temp file.
func TestWriteCache(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cache")
	for _, content := range []string{"first", "second, longer"} {
		if err := WriteCache(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); string(got) != content {
			t.Errorf("read %q, want %q", got, content)
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if temps, _ := Temps(dir); len(temps) != 0 {
		t.Errorf("temp files left: %v", temps)
	}
}
