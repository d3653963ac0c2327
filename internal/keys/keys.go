// Package keys owns muster's key pairs and how they are kept on disk.
//
// The mesh and every host hold one Pair: an age X25519 identity (others
// encrypt to it) and an ed25519 signing key (it signs what it writes). Secret
// halves live in files created with O_EXCL and mode 0600 in a 0700
// directory; keys that others can reach are refused, as ssh refuses an
// open private key. A Public is what others pin: the age recipient and the
// ed25519 public key, and a Fingerprint derived from both that names the
// holder in the spool. Vet refuses public keys that parse but cannot be
// trusted.
package keys

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"filippo.io/age"

	"github.com/muster-tool/muster/internal/atomicfile"
	"github.com/muster-tool/muster/internal/fault"
)

const (
	signSecretPrefix = "MUSTER-SIGN-SECRET-KEY-1:"
	signPublicPrefix = "ed25519:"
)

// Pair is a key pair: an age identity and an ed25519 signing key.
type Pair struct {
	Age  *age.X25519Identity
	Sign ed25519.PrivateKey
	// publicKept: Load took Sign's public half from ROLE.sign.pub (see
	// KeepPublic).
	publicKept bool
}

// Public is the public half of a Pair as text, the way it is pinned and
// published.
type Public struct {
	Age  string `toml:"age" json:"age"`   // age1...
	Sign string `toml:"sign" json:"sign"` // ed25519:BASE64
}

// Generate makes a new Pair.
func Generate() (*Pair, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return &Pair{Age: id, Sign: priv}, nil
}

// Public returns the public half.
func (p *Pair) Public() Public {
	return Public{
		Age:  p.Age.Recipient().String(),
		Sign: EncodeSignPublic(p.Sign.Public().(ed25519.PublicKey)),
	}
}

// EncodeSignPublic renders an ed25519 public key as text.
func EncodeSignPublic(k ed25519.PublicKey) string {
	return signPublicPrefix + base64.RawURLEncoding.EncodeToString(k)
}

// Recipient parses the age half.
func (p Public) Recipient() (*age.X25519Recipient, error) {
	r, err := age.ParseX25519Recipient(p.Age)
	if err != nil {
		return nil, fmt.Errorf("bad age public key %q: %v", p.Age, err)
	}
	return r, nil
}

// Verifier parses the ed25519 half.
func (p Public) Verifier() (ed25519.PublicKey, error) {
	s, ok := strings.CutPrefix(p.Sign, signPublicPrefix)
	if !ok {
		return nil, fmt.Errorf("bad signing public key %q: want the prefix %q", p.Sign, signPublicPrefix)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("bad signing public key %q", p.Sign)
	}
	return ed25519.PublicKey(b), nil
}

// Check parses both halves.
func (p Public) Check() error {
	if _, err := p.Recipient(); err != nil {
		return err
	}
	_, err := p.Verifier()
	return err
}

// Fingerprint is a short, stable, opaque name for the holder of these keys:
// the first 16 bytes of SHA-256 over both public keys, in hex. Node ids in
// the spool are fingerprints, never host names.
func (p Public) Fingerprint() string {
	h := sha256.New()
	h.Write([]byte("muster-fingerprint-v1\n"))
	h.Write([]byte(p.Age))
	h.Write([]byte{'\n'})
	h.Write([]byte(p.Sign))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// File names of a pair inside its directory, by role ("mesh" or "host").
func ageFile(dir, role string) string  { return filepath.Join(dir, role+".age") }
func signFile(dir, role string) string { return filepath.Join(dir, role+".sign") }
func pubFile(dir, role string) string  { return filepath.Join(dir, role+".sign.pub") }

// FileNames are the names of the files of role's pair in its directory:
// the two secret halves and the public-key file (see Load).
func FileNames(role string) []string {
	return []string{filepath.Base(ageFile("", role)), filepath.Base(signFile("", role)), filepath.Base(pubFile("", role))}
}

// Write stores the secret halves of p in dir as ROLE.age and ROLE.sign,
// creating dir with mode 0700 if needed. It never overwrites: if either file
// exists it fails with an error wrapping fs.ErrExist and writes nothing.
// It refuses, writing nothing, a directory others can reach, as Load does.
func Write(dir, role string, p *Pair) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// Load would refuse the keys in a directory others can reach.
	if err := checkPrivate(dir, nil); err != nil {
		return err
	}
	for _, f := range []string{ageFile(dir, role), signFile(dir, role)} {
		if _, err := os.Lstat(f); err == nil {
			return fmt.Errorf("key file %s already exists, refusing to overwrite it: %w", f, fs.ErrExist)
		}
	}
	ageText := []byte(p.Age.String() + "\n")
	signText := []byte(signSecretPrefix + base64.RawURLEncoding.EncodeToString(p.Sign.Seed()) + "\n")
	if err := atomicfile.CreateExclusive(ageFile(dir, role), ageText, 0o600); err != nil {
		return err
	}
	if err := atomicfile.CreateExclusive(signFile(dir, role), signText, 0o600); err != nil {
		os.Remove(ageFile(dir, role))
		return err
	}
	// A cache, which Load does without: not a reason to fail.
	_ = writePublic(dir, role, p.Sign)
	return nil
}

// Exists reports whether dir holds any key file for role.
func Exists(dir, role string) bool {
	for _, f := range []string{ageFile(dir, role), signFile(dir, role)} {
		if _, err := os.Lstat(f); err == nil {
			return true
		}
	}
	return false
}

// Load reads the pair for role from dir. Like ssh with an open private
// key, it refuses keys that others can reach: a key directory the group or
// others can enter, or a key file they can read or write. The refusal is
// classed fault.Refused, names each, and its hint is the chmod that fixes
// them. A key file that does not exist is an error wrapping
// fs.ErrNotExist.
func Load(dir, role string) (*Pair, error) {
	if err := checkPrivate(dir, []string{ageFile(dir, role), signFile(dir, role)}); err != nil {
		return nil, err
	}
	read := func(path string) (string, error) {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return "", &missingKeyError{path}
		}
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(b)), nil
	}
	at, err := read(ageFile(dir, role))
	if err != nil {
		return nil, err
	}
	id, err := age.ParseX25519Identity(at)
	if err != nil {
		return nil, fmt.Errorf("key file %s: not an age identity", ageFile(dir, role))
	}
	st, err := read(signFile(dir, role))
	if err != nil {
		return nil, err
	}
	enc, ok := strings.CutPrefix(st, signSecretPrefix)
	seed, derr := base64.RawURLEncoding.DecodeString(enc)
	if !ok || derr != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("key file %s: not a muster signing key", signFile(dir, role))
	}
	sign, kept := signingKey(dir, role, seed)
	return &Pair{Age: id, Sign: sign, publicKept: kept}, nil
}

// A signing key's public half is derived from its seed by a scalar
// multiplication, and the first one in a process builds the base point's
// table as well: about 0.7 ms of CPU, a tenth of a host's whole apply
// that finds nothing to do, which needs the public half for its node id
// and signs nothing. So ROLE.sign.pub keeps the public half beside the
// seed, sealed under a key derived from the seed (Sealer, as the host's
// state files are): only the holder of the seed can write one that Load
// takes. A file that is missing, damaged, of another key or changed by
// hand is ignored, and the public half derived again. Write writes the
// file; Load writes nothing (a command that promises to write nothing
// keeps its word), and KeepPublic writes it again for a pair Load had to
// derive.
const (
	pubPrefix = "MUSTER-SIGN-PUBLIC-KEY-1:"
	pubLabel  = "muster signing key public half v1"
)

// signingKey is the private key of seed, with the public half from
// ROLE.sign.pub when that file vouches for it (kept).
func signingKey(dir, role string, seed []byte) (k ed25519.PrivateKey, kept bool) {
	if data, err := os.ReadFile(pubFile(dir, role)); err == nil {
		if pub, ok := openPublic(seed, data); ok {
			return ed25519.PrivateKey(append(slices.Clip(seed), pub...)), true
		}
	}
	return ed25519.NewKeyFromSeed(seed), false
}

// KeepPublic writes ROLE.sign.pub in dir for p, which Load read from dir,
// unless Load took p's public half from that file already, so that the
// next Load need not derive it.
func KeepPublic(dir, role string, p *Pair) error {
	if p.publicKept {
		return nil
	}
	if err := writePublic(dir, role, p.Sign); err != nil {
		return err
	}
	p.publicKept = true
	return nil
}

// pubSealer seals the public-key file of seed's key.
func pubSealer(seed []byte) Sealer {
	k, err := NewSealer(seed, pubLabel)
	if err != nil {
		panic(err) // a 32-byte key of SHA-256 is always available
	}
	return k
}

// openPublic returns the public half data holds, if it is sealed under
// seed's key.
func openPublic(seed, data []byte) ([]byte, bool) {
	body, ok := pubSealer(seed).Open(data)
	if !ok {
		return nil, false
	}
	text, ok := strings.CutPrefix(strings.TrimSuffix(string(body), "\n"), pubPrefix)
	pub, err := base64.RawURLEncoding.DecodeString(text)
	if !ok || err != nil || len(pub) != ed25519.PublicKeySize {
		return nil, false
	}
	return pub, true
}

// publicFile is the content of ROLE.sign.pub for k.
func publicFile(k ed25519.PrivateKey) []byte {
	body := pubPrefix + base64.RawURLEncoding.EncodeToString(k.Public().(ed25519.PublicKey)) + "\n"
	return pubSealer(k.Seed()).Seal([]byte(body))
}

// writePublic writes k's public half to ROLE.sign.pub, for Load. It is a
// cache: a file that could not be written (a directory this user cannot
// write) only means the next Load derives the half again.
func writePublic(dir, role string, k ed25519.PrivateKey) error {
	return atomicfile.WriteCache(pubFile(dir, role), publicFile(k), 0o600)
}

type missingKeyError struct{ path string }

func (e *missingKeyError) Error() string { return "key file " + e.path + " does not exist" }
func (e *missingKeyError) Unwrap() error { return fs.ErrNotExist }

// checkPrivate refuses a key directory that the group or others can
// reach, and any of files (those that exist) that they can read or write.
func checkPrivate(dir string, files []string) error {
	var problems, chmods []string
	if st, err := os.Stat(dir); err == nil && st.Mode().Perm()&0o077 != 0 {
		problems = append(problems, fmt.Sprintf("key directory %s has mode %04o: others can reach the keys in it", dir, st.Mode().Perm()))
		chmods = append(chmods, "chmod 700 "+dir)
	}
	var open []string
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.Mode().Perm()&0o077 != 0 {
			problems = append(problems, fmt.Sprintf("key file %s has mode %04o: others can read it", f, st.Mode().Perm()))
			open = append(open, f)
		}
	}
	if len(open) > 0 {
		chmods = append(chmods, "chmod 600 "+strings.Join(open, " "))
	}
	if len(problems) == 0 {
		return nil
	}
	return fault.WithHint(fault.Refusedf("%s; refusing to use keys others can reach", strings.Join(problems, "; ")),
		"make them private: "+strings.Join(chmods, " && "))
}
