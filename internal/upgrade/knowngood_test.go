package upgrade

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Bless copies a binary once; blessing the same binary again (every apply
// that reports does) changes nothing; a rebuilt binary of the same version
// is copied again.
func TestBlessCopiesOnlyWhatChanged(t *testing.T) {
	state := t.TempDir()
	bin := filepath.Join(t.TempDir(), "muster")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho one\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if changed, err := Bless(state, bin, "1.0"); err != nil || !changed {
		t.Fatalf("first bless: %v %v", changed, err)
	}
	if changed, err := Bless(state, bin, "1.0"); err != nil || changed {
		t.Fatalf("blessing the known-good binary again: changed=%v %v", changed, err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho two\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(bin, later, later)
	if changed, err := Bless(state, bin, "1.0"); err != nil || !changed {
		t.Fatalf("a rebuilt binary was not blessed: %v %v", changed, err)
	}
	got, _ := os.ReadFile(filepath.Join(state, KnownGoodDir, "muster"))
	if string(got) != "#!/bin/sh\necho two\n" {
		t.Errorf("known-good copy = %q", got)
	}
	if changed, err := Bless(state, bin, "1.1"); err != nil || !changed {
		t.Fatalf("a new version was not blessed: %v %v", changed, err)
	}
	if v, _ := KnownGoodVersion(state); v != "1.1" {
		t.Errorf("version = %q", v)
	}
}
