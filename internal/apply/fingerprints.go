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
// Layout: the header line, then per file the path (uvarint length, bytes),
// device, inode (uvarints), size, modification and status-change times in
// nanoseconds (varints), and the 32-byte content digest.
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
	text := unsafe.String(unsafe.SliceData(body), len(body))
	p := len(fingerprintHeader)
	uv := func() uint64 {
		v, n := binary.Uvarint(body[p:])
		if n <= 0 {
			p = -1
			return 0
		}
		p += n
		return v
	}
	sv := func() int64 {
		v, n := binary.Varint(body[p:])
		if n <= 0 {
			p = -1
			return 0
		}
		p += n
		return v
	}
	count := uv()
	if p < 0 || count > uint64(len(body)) {
		return nil, errFingerprints
	}
	fps := make([]resource.Fingerprint, 0, count)
	for range count {
		var f resource.Fingerprint
		n := uv()
		if p < 0 || n > uint64(len(body)-p) {
			return nil, errFingerprints
		}
		f.Path = text[p : p+int(n)]
		p += int(n)
		if f.Dev = uv(); p < 0 {
			return nil, errFingerprints
		}
		if f.Ino = uv(); p < 0 {
			return nil, errFingerprints
		}
		if f.Size = sv(); p < 0 {
			return nil, errFingerprints
		}
		if f.Mtime = sv(); p < 0 {
			return nil, errFingerprints
		}
		if f.Ctime = sv(); p < 0 || len(body)-p < sha256.Size {
			return nil, errFingerprints
		}
		p += copy(f.Digest[:], body[p:])
		fps = append(fps, f)
	}
	if p != len(body) {
		return nil, errFingerprints
	}
	return fps, nil
}

func encodeFingerprints(fps []resource.Fingerprint) []byte {
	n := len(fingerprintHeader) + binary.MaxVarintLen64 + sha256.Size
	for i := range fps {
		n += len(fps[i].Path) + 6*binary.MaxVarintLen64 + sha256.Size
	}
	b := make([]byte, 0, n)
	b = append(b, fingerprintHeader...)
	b = binary.AppendUvarint(b, uint64(len(fps)))
	for i := range fps {
		f := &fps[i]
		b = binary.AppendUvarint(b, uint64(len(f.Path)))
		b = append(b, f.Path...)
		b = binary.AppendUvarint(b, f.Dev)
		b = binary.AppendUvarint(b, f.Ino)
		b = binary.AppendVarint(b, f.Size)
		b = binary.AppendVarint(b, f.Mtime)
		b = binary.AppendVarint(b, f.Ctime)
		b = append(b, f.Digest[:]...)
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
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
	return replaceCache(dir, fingerprintFile, encodeFingerprints(fps))
}
