package apply

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"unsafe"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/bincode"

	"github.com/muster-tool/muster/internal/resource"
)

// The fingerprints file keeps, from one run to the next, what lstat said of
// each declared file whose content was read back and matched (see
// resource.Fingerprint): the next run's first look at such a file, if it is
// still exactly as fingerprinted, does not read it. The read-back still
// reads every file, so a wrong fingerprint can at worst leave one file
// unrepaired for one run, with its line failed; it can never make a line
// ok. The file is a cache: one that is missing, torn by a crash, or of
// another version is ignored (every file is read) and written anew, so it
// is not fsynced. Its last 32 bytes are the sha256 of the rest.
//
// Layout, in bincode: the header line, the count, then per file the path,
// device and inode, size, modification and status-change times in
// nanoseconds, and the 32-byte content digest.
const (
	fingerprintFile   = "fingerprints"
	fingerprintHeader = "muster fingerprints v1\n"
)

// loadFingerprints returns the fingerprints kept in dir, nil when there are
// none that can be trusted to be whole.
func loadFingerprints(dir string) []resource.Fingerprint {
	data, err := os.ReadFile(filepath.Join(dir, fingerprintFile))
	if err != nil {
		return nil
	}
	fps, err := decodeFingerprints(data)
	if err != nil {
		return nil
	}
	return fps
}

var errFingerprints = errors.New("fingerprints file is not whole")

// decodeFingerprints decodes a fingerprints file. The paths point into
// data, which must not be written afterwards.
func decodeFingerprints(data []byte) ([]resource.Fingerprint, error) {
	if len(data) < len(fingerprintHeader)+sha256.Size || !bytes.HasPrefix(data, []byte(fingerprintHeader)) {
		return nil, errFingerprints
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if sha256.Sum256(body) != [sha256.Size]byte(sum) {
		return nil, errFingerprints
	}
	// The paths point into data, which is never written again.
	d := bincode.Decoder{S: unsafe.String(unsafe.SliceData(body), len(body))[len(fingerprintHeader):]}
	const least = 1 + 5 + sha256.Size // a path's length, five integers, the digest
	fps := make([]resource.Fingerprint, d.Count(least))
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

func encodeFingerprints(fps []resource.Fingerprint) []byte {
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

// keepFingerprints replaces the fingerprints file when fps differ from
// what it held (old). Errors are returned for tests; a run goes on without.
func keepFingerprints(dir string, old, fps []resource.Fingerprint) error {
	if slices.Equal(old, fps) {
		return nil
	}
	path := filepath.Join(dir, fingerprintFile)
	if len(fps) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return atomicfile.WriteCache(filepath.Join(dir, fingerprintFile), encodeFingerprints(fps), 0o600)
}
