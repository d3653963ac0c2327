package bundle

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"

	"filippo.io/age"
)

// Context binds a bundle to where it belongs. The signature covers it, so a
// bundle cannot be replayed as another kind, for another node, or under
// another name in the spool.
type Context struct {
	Kind string // "declaration", "report", "briefing", "join", "commit", "admission", ...
	Node string // opaque node id, or "" for mesh-wide objects
	Name string // the object's name in the spool
}

// Seal encodes payload as a sealed bundle: compressed, signed by signer for
// context c, and encrypted with age to every recipient. It is an error to
// give no recipients.
func Seal(payload []byte, c Context, signer ed25519.PrivateKey, recipients ...age.Recipient) ([]byte, error) {
	return seal(payload, c, signer, recipients)
}

// Sign encodes payload as a signed bundle: compressed and signed by signer
// for context c, not encrypted. Only for public records that hold no secrets
// and no host names.
func Sign(payload []byte, c Context, signer ed25519.PrivateKey) ([]byte, error) {
	return sign(payload, c, signer)
}

// Open decodes a sealed bundle: it decrypts it with identity, verifies that
// it is signed by signer and was made for exactly context c, and returns the
// payload. A bundle that fails any check is refused with an error classed
// fault.Refused that wraps one of the Err sentinels and names c.Name.
func Open(data []byte, c Context, identity age.Identity, signer ed25519.PublicKey) ([]byte, error) {
	if len(signer) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%s: expected signer key is %d bytes, not %d", subject(c), len(signer), ed25519.PublicKeySize)
	}
	payload, _, err := open(data, c, identity, signer)
	return payload, err
}

// OpenFrom is Open for callers who learn the signer from the payload, such
// as a join request signed by a new host key. The signature is verified
// against the key the bundle names, which OpenFrom returns: the caller MUST
// compare it with the key it expects before trusting the payload.
func OpenFrom(data []byte, c Context, identity age.Identity) (payload []byte, signer ed25519.PublicKey, err error) {
	return open(data, c, identity, nil)
}

// OpenSigned decodes a signed bundle: it verifies that it is signed by
// signer and was made for exactly context c, and returns the payload. It
// refuses as Open does.
func OpenSigned(data []byte, c Context, signer ed25519.PublicKey) ([]byte, error) {
	if len(signer) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%s: expected signer key is %d bytes, not %d", subject(c), len(signer), ed25519.PublicKeySize)
	}
	return openSigned(data, c, signer, true)
}

// Header is what Inspect learns from a bundle without any key.
type Header struct {
	Version  int
	Mode     Mode
	Size     int // the whole bundle, header line included
	BodySize int // the bytes after the header line

	// Sealed bundles only.
	Recipients int // age recipient stanzas
	SealedSize int // size of the encrypted signed record, from the ciphertext length

	// Signed bundles only: in a sealed bundle these are encrypted.
	Signer      ed25519.PublicKey // the key the bundle names; Inspect checks the signature against it
	Context     Context
	PayloadSize int // compressed
	ContentSize int // uncompressed, as the zstd frame declares it
}

// Inspect checks a bundle's header and structure without any key, as spool
// verification does: the header line and body length, and for a sealed
// bundle the age header and ciphertext length, for a signed bundle the signed
// record, its signature against the key it names, and the zstd frame. It
// catches truncated, padded and damaged objects, not forged ones: trust
// needs Open or OpenSigned with the expected signer.
func Inspect(data []byte) (Header, error) {
	return inspect(data)
}

// SealTOML marshals v as TOML and seals it like Seal.
func SealTOML(v any, c Context, signer ed25519.PrivateKey, recipients ...age.Recipient) ([]byte, error) {
	p, err := marshalTOML(v, c)
	if err != nil {
		return nil, err
	}
	return Seal(p, c, signer, recipients...)
}

// OpenTOML opens a sealed bundle like Open and decodes its TOML payload into
// v strictly: a key v has no place for is an error naming it.
func OpenTOML(data []byte, c Context, identity age.Identity, signer ed25519.PublicKey, v any) error {
	p, err := Open(data, c, identity, signer)
	if err != nil {
		return err
	}
	return unmarshalTOML(p, c, v)
}

// OpenFromTOML is OpenFrom followed by the strict TOML decoding of OpenTOML.
// The caller MUST compare the returned signer with the key it expects.
func OpenFromTOML(data []byte, c Context, identity age.Identity, v any) (ed25519.PublicKey, error) {
	p, signer, err := OpenFrom(data, c, identity)
	if err != nil {
		return nil, err
	}
	return signer, unmarshalTOML(p, c, v)
}

// SignTOML marshals v as TOML and signs it like Sign.
func SignTOML(v any, c Context, signer ed25519.PrivateKey) ([]byte, error) {
	p, err := marshalTOML(v, c)
	if err != nil {
		return nil, err
	}
	return Sign(p, c, signer)
}

// ReopenSignedTOML decodes, as OpenSignedTOML does, a signed bundle that
// OpenSignedTOML accepted before, given the SHA-256 of the bytes it
// accepted, which the caller kept where only it can change it (a host's
// commit applied, in its state under its key). Bytes of another digest are
// refused. It checks all that OpenSignedTOML checks but the signature
// itself, which the digest vouches for: an ed25519 verification, with the
// table the first one in a process builds, costs a host's apply that finds
// nothing new a few percent of its CPU time.
func ReopenSignedTOML(data []byte, verified [sha256.Size]byte, c Context, signer ed25519.PublicKey, v any) error {
	if sha256.Sum256(data) != verified {
		return refuse(subject(c), ErrBadSignature, "not the bytes verified before")
	}
	if len(signer) != ed25519.PublicKeySize {
		return fmt.Errorf("%s: expected signer key is %d bytes, not %d", subject(c), len(signer), ed25519.PublicKeySize)
	}
	p, err := openSigned(data, c, signer, false)
	if err != nil {
		return err
	}
	return unmarshalTOML(p, c, v)
}

// OpenSignedTOML opens a signed bundle like OpenSigned and decodes its TOML
// payload into v strictly.
func OpenSignedTOML(data []byte, c Context, signer ed25519.PublicKey, v any) error {
	p, err := OpenSigned(data, c, signer)
	if err != nil {
		return err
	}
	return unmarshalTOML(p, c, v)
}
