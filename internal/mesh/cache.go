package mesh

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"
)

// CacheFile is where the cache of kind for spool lives in the mesh's cache
// directory (DIR/cache): one file per spool, so that a mesh used with
// several spools (a local copy, the shared store) keeps one for each.
func CacheFile(cacheDir, kind, spool string) string {
	sum := sha256.Sum256([]byte(spool))
	return filepath.Join(cacheDir, fmt.Sprintf("%s-%x.cache", kind, sum[:8]))
}

// CacheDir is the mesh's cache directory.
func (m *Mesh) CacheDir() string { return filepath.Join(m.Dir, "cache") }
