package bundle

import (
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"
)

// The age X25519 recipient stanza, written here with fewer scalar
// multiplications than age's X25519Recipient spends: one ladder plus the
// ephemeral share, which comes from a table once a process seals often
// (see x25519ladder.go). Measured, that is about a fifth of declare for
// many nodes. Opening is left to age's own X25519Identity: it spends one
// ladder per stanza too, and saves nothing to replace. The stanza on the
// wire is the one age specifies: type "X25519", the ephemeral share in
// unpadded base64, and the file key sealed with ChaCha20-Poly1305 under
// HKDF-SHA-256(shared secret, salt = share || recipient, info = label).
// The tests open what this writes with age's own identity.

const x25519Label = "age-encryption.org/v1/X25519"

var stanzaBase64 = base64.RawStdEncoding.Strict()

// x25519Recipient wraps file keys for one age X25519 public key.
type x25519Recipient struct {
	pub *ecdh.PublicKey
}

func (r x25519Recipient) Wrap(fileKey []byte) ([]*age.Stanza, error) {
	var eph [32]byte
	if _, err := rand.Read(eph[:]); err != nil {
		return nil, err
	}
	share := x25519Share(&eph)
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

// fastRecipients returns rs with each stock age X25519 recipient replaced
// by the equivalent x25519Recipient; any other kind is kept as it is.
func fastRecipients(rs []age.Recipient) []age.Recipient {
	out := make([]age.Recipient, len(rs))
	for i, r := range rs {
		out[i] = r
		if x, ok := r.(*age.X25519Recipient); ok {
			if pub, err := decodeAgeKey(x.String(), "age"); err == nil {
				if k, err := ecdh.X25519().NewPublicKey(pub); err == nil {
					out[i] = x25519Recipient{pub: k}
				}
			}
		}
	}
	return out
}

// decodeAgeKey decodes the Bech32 encoding (BIP 173, without its length
// limit) that age uses for its keys, and returns the 32-byte key if the
// human-readable part is hrp.
func decodeAgeKey(s, hrp string) ([]byte, error) {
	if strings.ToLower(s) != s && strings.ToUpper(s) != s {
		return nil, errors.New("mixed case")
	}
	s = strings.ToLower(s)
	sep := strings.LastIndexByte(s, '1')
	if sep < 1 || sep+7 > len(s) || s[:sep] != hrp {
		return nil, errors.New("not a " + hrp + " key")
	}
	const charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
	data := make([]byte, 0, len(s)-sep-1)
	for _, c := range s[sep+1:] {
		v := strings.IndexRune(charset, c)
		if v < 0 {
			return nil, errors.New("invalid character")
		}
		data = append(data, byte(v))
	}
	if bech32Checksum(hrp, data) != 1 {
		return nil, errors.New("bad checksum")
	}
	data = data[:len(data)-6]
	var out []byte
	var acc, bits uint
	for _, v := range data {
		acc = acc<<5 | uint(v)
		bits += 5
		for bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	if bits >= 5 || acc&(1<<bits-1) != 0 {
		return nil, errors.New("bad padding")
	}
	if len(out) != 32 {
		return nil, errors.New("not a 32-byte key")
	}
	return out, nil
}

func bech32Checksum(hrp string, data []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	step := func(v byte) {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := range 5 {
			if top>>i&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	for i := range len(hrp) {
		step(hrp[i] >> 5)
	}
	step(0)
	for i := range len(hrp) {
		step(hrp[i] & 31)
	}
	for _, v := range data {
		step(v)
	}
	return chk
}
