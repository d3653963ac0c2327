package curve

import (
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"
)

// The age X25519 recipient stanza, written here with fewer scalar
// multiplications than age's X25519Recipient spends: one ladder plus the
// ephemeral share, which comes from a table in a Batch that seals many
// (see ladder.go). Opening is left to age's own X25519Identity: it spends
// one ladder per stanza too, and saves nothing to replace. The stanza on the
// wire is the one age specifies: type "X25519", the ephemeral share in
// unpadded base64, and the file key sealed with ChaCha20-Poly1305 under
// HKDF-SHA-256(shared secret, salt = share || recipient, info = label).
// The tests open what this writes with age's own identity.

const x25519Label = "age-encryption.org/v1/X25519"

var stanzaBase64 = base64.RawStdEncoding.Strict()

// x25519Recipient wraps file keys for one age X25519 public key.
type x25519Recipient struct {
	pub        *ecdh.PublicKey
	shareTable bool // take the ephemeral share from the table
}

// newX25519Recipient is r, taking ephemeral shares from the table when
// shareTable is set.
func newX25519Recipient(r *age.X25519Recipient, shareTable bool) (x25519Recipient, error) {
	pub, err := AgePoint(r)
	if err != nil {
		return x25519Recipient{}, err
	}
	k, err := ecdh.X25519().NewPublicKey(pub)
	if err != nil {
		return x25519Recipient{}, err
	}
	return x25519Recipient{pub: k, shareTable: shareTable}, nil
}

func (r x25519Recipient) Wrap(fileKey []byte) ([]*age.Stanza, error) {
	var eph [32]byte
	if _, err := rand.Read(eph[:]); err != nil {
		return nil, err
	}
	share := x25519Share(&eph, r.shareTable)
	secret, err := x25519Secret(&eph, r.pub.Bytes())
	if err != nil {
		return nil, fmt.Errorf("X25519 recipient: %v", err)
	}
	body, err := x25519Seal(secret, share, r.pub.Bytes(), fileKey)
	if err != nil {
		return nil, err
	}
	return []*age.Stanza{{
		Type: "X25519",
		Args: []string{stanzaBase64.EncodeToString(share)},
		Body: body,
	}}, nil
}

// x25519Seal seals the file key under the wrapping key
// HKDF-SHA-256(secret, salt = share || recipient, info = label).
func x25519Seal(secret, share, recipient, fileKey []byte) ([]byte, error) {
	salt := make([]byte, 0, len(share)+len(recipient))
	salt = append(append(salt, share...), recipient...)
	key, err := hkdf.Key(sha256.New, secret, salt, x25519Label, chacha20poly1305.KeySize)
	if err != nil {
		return nil, err
	}
	aead, err := chacha20poly1305.New(key)
	if err != nil {
		return nil, err
	}
	// Each wrapping key is derived from a fresh ephemeral share, so the
	// fixed nonce is never reused under one key (as age specifies).
	return aead.Seal(nil, make([]byte, aead.NonceSize()), fileKey, nil), nil
}
