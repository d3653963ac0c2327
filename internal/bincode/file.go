package bincode

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/hugepage"
)

// A cache file is its magic line, which says what it is, the SHA-256 of
// the payload, and the payload. It is written whole with atomicfile, so
// concurrent writers leave one complete file, and a file damaged since
// does not pass its checksum.

// ErrNoFile means there was no cache file.
var ErrNoFile = errors.New("no cache file")

// ReadFile returns the payload of the cache file at path, which must start
// with magic (a line ending in "\n"). A missing file is ErrNoFile.
func ReadFile(path, magic string) ([]byte, error) {
	data, err := readFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoFile
	}
	if err != nil {
		return nil, err
	}
	rest, ok := bytes.CutPrefix(data, []byte(magic))
	if !ok || len(rest) < sha256.Size {
		return nil, fmt.Errorf("not a %s", strings.TrimPrefix(strings.TrimSpace(magic), "muster "))
	}
	sum, payload := rest[:sha256.Size], rest[sha256.Size:]
	if got := sha256.Sum256(payload); !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("checksum does not match: the file is damaged")
	}
	return payload, nil
}

// WriteFile replaces the cache file at path with magic and the payload
// appendPayload appends, making its directory (mode 0700) if need be.
func WriteFile(path, magic string, appendPayload func([]byte) []byte) error {
	// The payload is appended after room for the header, so it is not
	// copied again.
	head := len(magic) + sha256.Size
	out := make([]byte, head)
	copy(out, magic)
	out = appendPayload(out)
	sum := sha256.Sum256(out[head:])
	copy(out[len(magic):], sum[:])
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, out, 0o600)
}

// CheckOwner returns why a cache made for spool and mesh (the mesh's
// fingerprint) is not to be used for wantSpool and wantMesh, or nil: its
// facts were read from another spool, or decrypted and verified with
// another mesh's keys.
func CheckOwner(spool, mesh, wantSpool, wantMesh string) error {
	switch {
	case spool != wantSpool:
		return fmt.Errorf("belongs to spool %s, not %s", spool, wantSpool)
	case mesh != wantMesh:
		return fmt.Errorf("belongs to mesh %s, not %s", mesh, wantMesh)
	}
	return nil
}

// readFile reads the file at path whole, into a buffer that huge pages
// back when it is large: a report cache of a hundred thousand nodes is
// 50 MB, which in 4 KiB pages took more time to fault in than to read
// and check.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// One byte more than the size, so that a file grown since is seen
	// whole (and fails its checksum) rather than cut at the old size.
	b := hugepage.Slice[byte](int(st.Size()) + 1)
	n, err := io.ReadFull(f, b)
	switch {
	case err == nil:
		// Grown: read the rest in the usual way.
		rest, err := io.ReadAll(f)
		if err != nil {
			return nil, err
		}
		return append(b, rest...), nil
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return b[:n], nil
	}
	return nil, err
}
