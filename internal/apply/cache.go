package apply

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/generation"
)

// The declaration cache keeps the last declaration this host verified,
// decoded, so that re-applying the same generation (drift repair, the
// common case from a timer) does not decode the same TOML again: for a
// thousand resources that decode costs more than observing them all.
//
// The cache is used only for the object name it was written for, by the
// same muster version, and only when the object's sha256 is the one
// verified when the cache was written, so a changed or forged object is
// verified in full (and refused) as before. The one exception is the
// declaration of the commit this host applied, when the spool still
// holds that same commit (its digest checked as on every run): it is not
// read again at all, because objects are write-once and this one was
// verified when the cache was written (see fetchNewest).
// A declaration is cached only once it passed checkDeclaration, which a
// declaration taken from the cache does not go through again: the check
// depends on nothing but the declaration and the muster version the
// cache is bound to (v5 on: a cache of v4 held declarations not yet
// checked).
//
// The cache is sealed with AES-GCM under a key derived from the host's
// signing key: it holds the declaration's plaintext, secrets included, so
// it is as private as the host key beside it, and nothing but this host can
// write one that opens. A cache that does not open, torn by a crash or
// tampered with, is a miss; it is not fsynced for that reason. The
// plaintext is generation.NodeDeclaration's EncodeCache: cacheVersion
// changes whenever its layout does.
const (
	cacheFile    = "declaration.cache"
	cacheVersion = "muster declaration cache v5"
)

func cacheKey(sign ed25519.PrivateKey) ([]byte, error) {
	return hkdf.Key(sha256.New, sign.Seed(), nil, cacheVersion, 32)
}

// cacheAD binds a cache to the object, its bytes and the muster version
// that decoded them.
func cacheAD(name string, sum [32]byte, version string) []byte {
	return fmt.Appendf(nil, "%s\x00%s\x00%x\x00%s", cacheVersion, name, sum, version)
}

func cacheAEAD(sign ed25519.PrivateKey) (cipher.AEAD, error) {
	key, err := cacheKey(sign)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// loadCachedDeclaration returns the cached declaration of object name and
// the sha256 of the bytes it was decoded from, if the cache was written
// for that object by this muster version. The file starts with that sum,
// which the sealing binds as it binds the name.
func loadCachedDeclaration(dir string, sign ed25519.PrivateKey, name string, version string) (*generation.NodeDeclaration, [32]byte, bool) {
	var sum [32]byte
	data, err := os.ReadFile(filepath.Join(dir, cacheFile))
	if err != nil {
		return nil, sum, false
	}
	aead, err := cacheAEAD(sign)
	if err != nil || len(data) < len(sum)+aead.NonceSize() {
		return nil, sum, false
	}
	copy(sum[:], data)
	data = data[len(sum):]
	// Decrypted in place, and the declaration's strings point into the
	// plaintext, so every declared file's content is in memory once.
	ct := data[aead.NonceSize():]
	plain, err := aead.Open(ct[:0], data[:aead.NonceSize()], ct, cacheAD(name, sum, version))
	if err != nil || len(plain) == 0 {
		return nil, sum, false
	}
	// Not copied: a second copy of the content shows in apply's peak
	// memory. plain is never written again and nothing else refers to it.
	nd, err := generation.DecodeCache(unsafe.String(&plain[0], len(plain)))
	if err != nil {
		return nil, sum, false
	}
	return nd, sum, true
}

// saveCachedDeclaration replaces the cache; errors are returned for tests
// but a run goes on without a cache.
func saveCachedDeclaration(dir string, sign ed25519.PrivateKey, name string, sum [32]byte, version string, nd *generation.NodeDeclaration) error {
	plain := nd.EncodeCache()
	aead, err := cacheAEAD(sign)
	if err != nil {
		return err
	}
	head := make([]byte, len(sum)+aead.NonceSize(), len(sum)+aead.NonceSize()+len(plain)+aead.Overhead())
	copy(head, sum[:])
	nonce := head[len(sum):]
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	sealed := aead.Seal(head, nonce, plain, cacheAD(name, sum, version))
	return atomicfile.WriteCache(filepath.Join(dir, cacheFile), sealed, 0o600)
}
