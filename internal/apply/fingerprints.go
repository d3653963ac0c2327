package apply

import (
	"errors"
	"os"
	"path/filepath"
	"slices"

	"github.com/muster-tool/muster/internal/atomicfile"

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
// is not fsynced. Its layout is resource.EncodeFingerprints'.
const fingerprintFile = "fingerprints"

// loadFingerprints returns the fingerprints kept in dir, nil when there are
// none that can be trusted to be whole.
func loadFingerprints(dir string) []resource.Fingerprint {
	data, err := os.ReadFile(filepath.Join(dir, fingerprintFile))
	if err != nil {
		return nil
	}
	fps, err := resource.DecodeFingerprints(data)
	if err != nil {
		return nil
	}
	return fps
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
	return atomicfile.WriteCache(filepath.Join(dir, fingerprintFile), resource.EncodeFingerprints(fps), 0o600)
}
