package apply

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/muster-tool/muster/internal/resource"
)

func sampleFingerprints() []resource.Fingerprint {
	return []resource.Fingerprint{
		{Path: "/etc/motd", Dev: 2049, Ino: 1 << 40, Size: 18, Mtime: 1_790_000_000_123_456_789, Ctime: 1_790_000_000_987_654_321, Digest: sha256.Sum256([]byte("a"))},
		{Path: "/srv/with\ttab and ünïcode", Dev: 0, Ino: 7, Size: 0, Mtime: -5, Ctime: 0, Digest: sha256.Sum256(nil)},
	}
}

// A fingerprints file that is not whole is not trusted in any part: every
// file is then read.
func TestFingerprintsNotWholeAreIgnored(t *testing.T) {
	data := resource.EncodeFingerprints(sampleFingerprints())
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, fingerprintFile), data[:len(data)-1], 0o600); err != nil {
		t.Fatal(err)
	}
	if fps := loadFingerprints(dir); fps != nil {
		t.Errorf("torn file loaded as %+v", fps)
	}
}

// The file is written only when the fingerprints changed, and removed when
// there are none.
func TestKeepFingerprints(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, fingerprintFile)
	fps := sampleFingerprints()
	if err := keepFingerprints(dir, nil, fps); err != nil {
		t.Fatal(err)
	}
	if got := loadFingerprints(dir); !slices.Equal(got, fps) {
		t.Fatalf("kept %+v, want %+v", got, fps)
	}
	os.Chmod(path, 0o400)
	before, _ := os.Stat(path)
	if err := keepFingerprints(dir, fps, slices.Clone(fps)); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(path); !os.SameFile(before, after) || after.Mode() != before.Mode() {
		t.Error("unchanged fingerprints rewrote the file")
	}
	if err := keepFingerprints(dir, fps, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("no fingerprints left the file: %v", err)
	}
}
