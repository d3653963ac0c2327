// Package token owns the enrolment token: the one line an operator carries
// by hand from `muster enrol issue` to `muster enrol join`.
//
// A token is "MUSTER-JOIN-" followed by unpadded base32 (RFC 4648) of:
//
//	version   1 byte   (1)
//	secret   16 bytes  one-time secret; the proof key is derived from it
//	mesh     16 bytes  fingerprint of the mesh's public keys (the host pins it)
//	expires   4 bytes  big-endian Unix seconds
//	namelen   1 byte   1..63
//	name      namelen bytes of the node name
//	check     4 bytes  first bytes of SHA-256 over everything above
//
// The proof key is an ed25519 key whose seed is SHA-256("muster-token-proof-v1"
// || secret); the token id is the first 16 bytes of SHA-256 of its public key,
// in hex. The mesh keeps only the proof public key (the verifier), never the
// secret, so no command can print a token again.
package token

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Prefix starts every token.
const Prefix = "MUSTER-JOIN-"

const (
	version   = 1
	secretLen = 16
	meshLen   = 16
	checkLen  = 4
	// MaxName is the longest node name a token can carry.
	MaxName = 63
)

var enc = base32.StdEncoding.WithPadding(base32.NoPadding)

// ErrMalformed is returned for anything that is not a valid token: wrong
// prefix, bad characters, bad length, a checksum that does not match (a
// mistyped character), an unknown version.
var ErrMalformed = errors.New("malformed token")

// nameRE is compiled on first use, not by every muster process at start-up.
var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`) })

// CheckName validates a node name: 1 to 63 characters of lowercase letters,
// digits, dots and hyphens, starting and ending with a letter or digit.
func CheckName(name string) error {
	if len(name) == 0 || len(name) > MaxName || !nameRE().MatchString(name) {
		return fmt.Errorf("invalid node name %q: use 1 to %d lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit", name, MaxName)
	}
	return nil
}

// Token is a decoded token.
type Token struct {
	Secret  [secretLen]byte
	Mesh    [meshLen]byte // mesh fingerprint, raw
	Expires time.Time
	Name    string
}

// New makes a token with a fresh secret.
func New(name string, meshFingerprint string, expires time.Time) (*Token, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	fp, err := hex.DecodeString(meshFingerprint)
	if err != nil || len(fp) != meshLen {
		return nil, fmt.Errorf("bad mesh fingerprint %q", meshFingerprint)
	}
	// The expiry travels as 32-bit Unix seconds; a time it cannot hold
	// would come back as another one.
	if u := expires.Unix(); u <= 0 || u > math.MaxUint32 {
		return nil, fmt.Errorf("expiry %s is out of range: a token can expire between 1970 and 2106", expires.UTC().Format(time.RFC3339))
	}
	t := &Token{Name: name, Expires: expires.UTC().Truncate(time.Second)}
	copy(t.Mesh[:], fp)
	if _, err := rand.Read(t.Secret[:]); err != nil {
		return nil, err
	}
	return t, nil
}

// MeshFingerprint is the pinned mesh fingerprint in hex.
func (t *Token) MeshFingerprint() string { return hex.EncodeToString(t.Mesh[:]) }

// ProofKey is the one-time signing key derived from the secret.
func (t *Token) ProofKey() ed25519.PrivateKey {
	h := sha256.New()
	h.Write([]byte("muster-token-proof-v1"))
	h.Write(t.Secret[:])
	return ed25519.NewKeyFromSeed(h.Sum(nil))
}

// Verifier is the public half of the proof key: what the mesh keeps.
func (t *Token) Verifier() ed25519.PublicKey {
	return t.ProofKey().Public().(ed25519.PublicKey)
}

// ID names the token in the spool.
func (t *Token) ID() string { return IDOf(t.Verifier()) }

// IDOf computes a token id from a verifier.
func IDOf(verifier ed25519.PublicKey) string {
	h := sha256.Sum256(verifier)
	return hex.EncodeToString(h[:16])
}

// String encodes the token as one line.
func (t *Token) String() string {
	var b bytes.Buffer
	b.WriteByte(version)
	b.Write(t.Secret[:])
	b.Write(t.Mesh[:])
	binary.Write(&b, binary.BigEndian, uint32(t.Expires.Unix()))
	b.WriteByte(byte(len(t.Name)))
	b.WriteString(t.Name)
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:checkLen])
	return Prefix + enc.EncodeToString(b.Bytes())
}

// Parse decodes a token. Whitespace around it (and line breaks inside, as a
// terminal may wrap a pasted line) is ignored; case is not significant.
func Parse(s string) (*Token, error) {
	s = strings.Join(strings.Fields(s), "")
	s = strings.ToUpper(s)
	body, ok := strings.CutPrefix(s, Prefix)
	if !ok {
		return nil, fmt.Errorf("%w: it must start with %s", ErrMalformed, Prefix)
	}
	raw, err := enc.DecodeString(body)
	if err != nil {
		return nil, fmt.Errorf("%w: not valid base32 (a character was mistyped?)", ErrMalformed)
	}
	min := 1 + secretLen + meshLen + 4 + 1 + 1 + checkLen
	if len(raw) < min {
		return nil, fmt.Errorf("%w: too short (was it cut off?)", ErrMalformed)
	}
	data, check := raw[:len(raw)-checkLen], raw[len(raw)-checkLen:]
	sum := sha256.Sum256(data)
	if !bytes.Equal(sum[:checkLen], check) {
		return nil, fmt.Errorf("%w: checksum does not match (a character was mistyped or the token was cut off)", ErrMalformed)
	}
	if data[0] != version {
		return nil, fmt.Errorf("%w: unknown token version %d", ErrMalformed, data[0])
	}
	t := &Token{}
	p := data[1:]
	copy(t.Secret[:], p[:secretLen])
	p = p[secretLen:]
	copy(t.Mesh[:], p[:meshLen])
	p = p[meshLen:]
	t.Expires = time.Unix(int64(binary.BigEndian.Uint32(p[:4])), 0).UTC()
	p = p[4:]
	n := int(p[0])
	p = p[1:]
	if n != len(p) {
		return nil, fmt.Errorf("%w: name length does not match", ErrMalformed)
	}
	t.Name = string(p)
	if err := CheckName(t.Name); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return t, nil
}
