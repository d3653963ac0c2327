package bincode

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"

	"github.com/muster-tool/muster/internal/atomicfile"
)

// A cache file is its magic line, which says what it is and how its
// payload is checked, the checksum, and the payload. It is written whole
// with atomicfile, so concurrent writers leave one complete file, and a
// file damaged since does not pass its checksum. The checksum finds damage,
// not tampering (the caches live in the mesh directory, beside its keys):
// it is a CRC-32C, which the CPU computes in hardware, where a SHA-256, which
// files written before carry and are still read with, took a third of a
// second of every report at 100,000 nodes.

// ErrNoFile means there was no cache file.
var ErrNoFile = errors.New("no cache file")

// ReadFile returns the payload of the cache file at path, whose magic line
// is magic (a line ending in "\n") as WriteFile writes it, or magic itself
// in a file written before, checked by SHA-256. A missing file is
// ErrNoFile. older says the file was written before, so that the caller
// writes it anew.
func ReadFile(path, magic string) (payload []byte, older bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, ErrNoFile
	}
	if err != nil {
		return nil, false, err
	}
	if rest, ok := bytes.CutPrefix(data, []byte(crcMagic(magic))); ok && len(rest) >= 4 {
		sum, payload := rest[:4], rest[4:]
		if binary.BigEndian.Uint32(sum) != crc32.Checksum(payload, castagnoli) {
			return nil, false, fmt.Errorf("checksum does not match: the file is damaged")
		}
		return payload, false, nil
	}
	rest, ok := bytes.CutPrefix(data, []byte(magic))
	if !ok || len(rest) < sha256.Size {
		return nil, false, fmt.Errorf("not a %s", strings.TrimPrefix(strings.TrimSpace(magic), "muster "))
	}
	sum, payload := rest[:sha256.Size], rest[sha256.Size:]
	if got := sha256.Sum256(payload); !bytes.Equal(got[:], sum) {
		return nil, false, fmt.Errorf("checksum does not match: the file is damaged")
	}
	return payload, true, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcMagic is the magic line of a file checked by CRC-32C.
func crcMagic(magic string) string { return strings.TrimSuffix(magic, "\n") + " (crc32c)\n" }

// WriteFile replaces the cache file at path with magic and the payload
// appendPayload appends, making its directory (mode 0700) if need be.
func WriteFile(path, magic string, appendPayload func([]byte) []byte) error {
	// The payload is appended after room for the header, so it is not
	// copied again.
	magic = crcMagic(magic)
	head := len(magic) + 4
	out := make([]byte, head)
	copy(out, magic)
	out = appendPayload(out)
	binary.BigEndian.PutUint32(out[len(magic):], crc32.Checksum(out[head:], castagnoli))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, out, 0o600)
}
