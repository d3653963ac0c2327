package resource

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"unsafe"

	"github.com/muster-tool/muster/internal/bincode"
)

// The layout of the fingerprints a host keeps from one run to the next
// (apply's fingerprints file), in bincode: the header line, the count,
// then per file the path, device and inode, size, modification and
// status-change times in nanoseconds, and the 32-byte content digest. Its
// last 32 bytes are the sha256 of the rest, so a file torn by a crash is
// never mistaken for a whole one.
const fingerprintHeader = "muster fingerprints v1\n"

var errFingerprints = errors.New("fingerprints file is not whole")

// DecodeFingerprints decodes what EncodeFingerprints wrote, refusing data
// that is not whole. The paths point into data, which the caller must not
// change afterwards (a copy would be 7 MiB more for a host of 100,000
// files).
func DecodeFingerprints(data []byte) ([]Fingerprint, error) {
	if len(data) < len(fingerprintHeader)+sha256.Size || !bytes.HasPrefix(data, []byte(fingerprintHeader)) {
		return nil, errFingerprints
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if sha256.Sum256(body) != [sha256.Size]byte(sum) {
		return nil, errFingerprints
	}
	rest := body[len(fingerprintHeader):]
	d := bincode.Decoder{S: unsafe.String(unsafe.SliceData(rest), len(rest))}
	const least = 1 + 5 + sha256.Size // a path's length, five integers, the digest
	fps := make([]Fingerprint, d.Count(least))
	for i := range fps {
		f := &fps[i]
		f.Path = d.Str()
		f.Dev = d.Uint()
		f.Ino = d.Uint()
		f.Size = d.Int()
		f.Mtime = d.Int()
		f.Ctime = d.Int()
		copy(f.Digest[:], d.Fixed(sha256.Size))
	}
	if d.Err != nil || d.S != "" {
		return nil, errFingerprints
	}
	return fps, nil
}

// EncodeFingerprints returns fps in their layout.
func EncodeFingerprints(fps []Fingerprint) []byte {
	n := len(fingerprintHeader) + binary.MaxVarintLen64 + sha256.Size
	for i := range fps {
		n += len(fps[i].Path) + 6*binary.MaxVarintLen64 + sha256.Size
	}
	e := bincode.Encoder{B: make([]byte, 0, n)}
	e.Raw([]byte(fingerprintHeader))
	e.Uint(uint64(len(fps)))
	for i := range fps {
		f := &fps[i]
		e.Str(f.Path)
		e.Uint(f.Dev)
		e.Uint(f.Ino)
		e.Int(f.Size)
		e.Int(f.Mtime)
		e.Int(f.Ctime)
		e.Raw(f.Digest[:])
	}
	sum := sha256.Sum256(e.B)
	return append(e.B, sum[:]...)
}
