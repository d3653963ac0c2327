package bincode

import (
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testMagic = "muster test cache\n"

func TestFileRoundTripAndDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.cache")
	if _, _, err := ReadFile(path, testMagic); !errors.Is(err, ErrNoFile) {
		t.Fatalf("a missing file: %v, want ErrNoFile", err)
	}
	payload := []byte("the payload\x00\xff")
	if err := WriteFile(path, testMagic, func(b []byte) []byte { return append(b, payload...) }); err != nil {
		t.Fatal(err)
	}
	got, older, err := ReadFile(path, testMagic)
	if err != nil || string(got) != string(payload) || older {
		t.Fatalf("read back %q, %v (older: %v)", got, err, older)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the file's mode: %v, %v; want 0600", fi.Mode(), err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Every single bit flipped in the payload or the checksum is found.
	head := len(crcMagic(testMagic))
	for i := head; i < len(data); i++ {
		for bit := range 8 {
			bad := []byte(string(data))
			bad[i] ^= 1 << bit
			if err := os.WriteFile(path, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, _, err := ReadFile(path, testMagic); err == nil || !strings.Contains(err.Error(), "checksum does not match") {
				t.Fatalf("byte %d bit %d flipped: %v, want a checksum that does not match", i, bit, err)
			}
		}
	}
	for _, junk := range []string{"", "muster other cache\n", testMagic[:5]} {
		if err := os.WriteFile(path, []byte(junk), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ReadFile(path, testMagic); err == nil || !strings.Contains(err.Error(), "not a test cache") {
			t.Errorf("%q: %v, want not a test cache", junk, err)
		}
	}
}

// A file written before the checksum was a CRC-32C is still read.
func TestFileWithSHA256(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.cache")
	payload := []byte("older payload")
	sum := sha256.Sum256(payload)
	if err := os.WriteFile(path, append(append([]byte(testMagic), sum[:]...), payload...), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, older, err := ReadFile(path, testMagic); err != nil || string(got) != string(payload) || !older {
		t.Fatalf("read back %q, %v (older: %v, want true)", got, err, older)
	}
	sum[0] ^= 1
	if err := os.WriteFile(path, append(append([]byte(testMagic), sum[:]...), payload...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadFile(path, testMagic); err == nil || !strings.Contains(err.Error(), "checksum does not match") {
		t.Errorf("a damaged older file: %v", err)
	}
}
