package bincode

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testMagic = "muster test cache\n"

func TestFileRoundTripAndDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.cache")
	if _, err := ReadFile(path, testMagic); !errors.Is(err, ErrNoFile) {
		t.Fatalf("a missing file: %v, want ErrNoFile", err)
	}
	payload := []byte("the payload\x00\xff")
	if err := WriteFile(path, testMagic, func(b []byte) []byte { return append(b, payload...) }); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path, testMagic)
	if err != nil || string(got) != string(payload) {
		t.Fatalf("read back %q, %v", got, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the file's mode: %v, %v; want 0600", fi.Mode(), err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A bit flipped anywhere in the checksum or the payload is found.
	for i := len(testMagic); i < len(data); i++ {
		bad := []byte(string(data))
		bad[i] ^= 0x10
		if err := os.WriteFile(path, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadFile(path, testMagic); err == nil || !strings.Contains(err.Error(), "checksum does not match") {
			t.Fatalf("byte %d changed: %v, want a checksum that does not match", i, err)
		}
	}
	for _, junk := range []string{"", "muster other cache\n", testMagic[:5]} {
		if err := os.WriteFile(path, []byte(junk), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadFile(path, testMagic); err == nil || !strings.Contains(err.Error(), "not a test cache") {
			t.Errorf("%q: %v, want not a test cache", junk, err)
		}
	}
}

// A large payload (read into memory huge pages back) comes back whole.
func TestFileLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "large.cache")
	payload := make([]byte, 9<<20+7)
	for i := range payload {
		payload[i] = byte(i * 7 / 5)
	}
	if err := WriteFile(path, testMagic, func(b []byte) []byte { return append(b, payload...) }); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path, testMagic)
	if err != nil || string(got) != string(payload) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(payload))
	}
}

// A file longer than its size said when it was opened is read whole:
// a file of the kernel's says 0.
func TestReadFileBeyondItsSize(t *testing.T) {
	const path = "/proc/self/cmdline"
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Skipf("%s: %v, size not 0", path, err)
	}
	got, err := readFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) || len(want) < 2 {
		t.Errorf("read %q, want %q", got, want)
	}
}
