package resource

import (
	"crypto/sha256"
	"slices"
	"testing"
)

func sampleFingerprints() []Fingerprint {
	return []Fingerprint{
		{Path: "/etc/motd", Dev: 2049, Ino: 1 << 40, Size: 18, Mtime: 1_790_000_000_123_456_789, Ctime: 1_790_000_000_987_654_321, Digest: sha256.Sum256([]byte("a"))},
		{Path: "/srv/with\ttab and ünïcode", Dev: 0, Ino: 7, Size: 0, Mtime: -5, Ctime: 0, Digest: sha256.Sum256(nil)},
	}
}

func TestFingerprintsRoundTrip(t *testing.T) {
	want := sampleFingerprints()
	got, err := DecodeFingerprints(EncodeFingerprints(want))
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, want)
	}
	if got, err := DecodeFingerprints(EncodeFingerprints(nil)); err != nil || len(got) != 0 {
		t.Fatalf("empty round trip: %+v, %v", got, err)
	}
}

// Fingerprints that are not whole are not trusted in any part.
func TestFingerprintsNotWholeAreRefused(t *testing.T) {
	data := EncodeFingerprints(sampleFingerprints())
	for _, n := range []int{0, 10, len(fingerprintHeader), len(data) / 2, len(data) - 1} {
		if fps, err := DecodeFingerprints(data[:n]); err == nil {
			t.Errorf("cut at %d of %d bytes: decoded %+v", n, len(data), fps)
		}
	}
	for i := range data {
		bad := slices.Clone(data)
		bad[i] ^= 0x01
		if fps, err := DecodeFingerprints(bad); err == nil {
			t.Fatalf("byte %d flipped: decoded %+v", i, fps)
		}
	}
}
