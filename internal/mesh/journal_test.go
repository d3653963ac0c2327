package mesh

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func newMesh(t *testing.T, name string) *Mesh {
	t.Helper()
	base := t.TempDir()
	sp := filepath.Join(base, "spool")
	if err := os.Mkdir(sp, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := Init(context.Background(), filepath.Join(base, name), sp, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func readJournal(t *testing.T, j *Journal) []string {
	t.Helper()
	var lines []string
	if err := j.Read(func(line []byte) { lines = append(lines, string(line)) }); err != nil {
		t.Fatal(err)
	}
	return lines
}

// Lines come back in the order they were appended; an append a crash cut
// short loses that line alone, not the next one.
func TestJournalAppendAndRead(t *testing.T) {
	m := newMesh(t, "mesh")
	j := m.Journal("test.jsonl")
	if got := readJournal(t, j); len(got) != 0 {
		t.Fatalf("a journal not written yet has lines %q", got)
	}
	for _, v := range []int{1, 2} {
		if err := j.Append(map[string]int{"n": v}); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(j.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v, want 0600", fi.Mode().Perm())
	}
	if err := os.Truncate(j.Path(), fi.Size()-3); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(map[string]int{"n": 3}); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"n":1}`, `{"n":`, `{"n":3}`}
	if got := readJournal(t, j); !slices.Equal(got, want) {
		t.Errorf("read %q, want %q", got, want)
	}
}

// A journal of another mesh, or one whose first line is damaged, is
// refused with the file's name and what to do.
func TestJournalOfAnotherMesh(t *testing.T) {
	m, other := newMesh(t, "mesh"), newMesh(t, "other")
	if err := other.Journal("test.jsonl").Append(1); err != nil {
		t.Fatal(err)
	}
	theirs, err := os.ReadFile(other.Journal("test.jsonl").Path())
	if err != nil {
		t.Fatal(err)
	}
	j := m.Journal("test.jsonl")
	for what, data := range map[string][]byte{
		"not by this mesh": theirs,
		"is corrupt":       append([]byte("x"), theirs...),
	} {
		if err := os.WriteFile(j.Path(), data, 0o600); err != nil {
			t.Fatal(err)
		}
		err := j.Read(func([]byte) { t.Error("a line of a refused journal was read") })
		if err == nil || !strings.Contains(err.Error(), what) || !strings.Contains(err.Error(), j.Path()) {
			t.Errorf("read: %v, want %q naming %s", err, what, j.Path())
		}
	}
}
