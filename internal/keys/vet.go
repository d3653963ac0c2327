package keys

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"sync"

	"filippo.io/age"
	"filippo.io/edwards25519"

	"github.com/muster-tool/muster/internal/fault"
)

// Vet refuses public keys that parse but cannot be trusted: an age key
// nothing can be sealed to, or a signing key for which anyone can make a
// signature that verifies. No key Generate makes is refused; a key pair
// that is refused was made by hand. The error is classed fault.Refused and
// names the key.
func (p Public) Vet() error {
	r, err := p.Recipient()
	if err != nil {
		return fault.New(fault.Refused, err)
	}
	if err := VetRecipient(r); err != nil {
		return err
	}
	v, err := p.Verifier()
	if err != nil {
		return fault.New(fault.Refused, err)
	}
	return VetVerifier(v)
}

// VetRecipient refuses an age X25519 key of low order. age parses any 32
// bytes as a key, but for a point of low order the shared secret is zero
// whatever the sender's scalar, and age refuses to seal to it. X25519
// clamps every scalar to a multiple of eight, so the secret is zero with
// every scalar or with none: one X25519 of the key with a scalar of this
// process finds them, where sealing a file key to it, as age does, takes
// two (the ephemeral key's and the secret). A key whose bytes cannot be
// had (see x25519Point) is vetted by sealing to it.
func VetRecipient(r *age.X25519Recipient) error {
	var err error
	if pub, ok := x25519Point(r); ok {
		_, err = vetScalar().ECDH(pub)
	} else {
		_, err = r.Wrap(make([]byte, 16))
	}
	if err != nil {
		return fault.Refusedf("age key %s is a point of low order: nothing can be sealed to it", r)
	}
	return nil
}

// vetScalar is the scalar VetRecipient multiplies keys by: any scalar
// does, as X25519 clamps it.
var vetScalar = sync.OnceValue(func() *ecdh.PrivateKey {
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return k
})

// bech32Chars are Bech32's 32 characters, in the order of their values
// (BIP 173).
const bech32Chars = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

// x25519Point returns the point of an age recipient, which age keeps to
// itself. It reads the Bech32 data of the recipient's string, which age
// made and checked: after the last "1", five bits a character, less the
// six characters of the checksum. ok is false for anything but 32 bytes
// and four zero bits of padding.
func x25519Point(r *age.X25519Recipient) (pub *ecdh.PublicKey, ok bool) {
	s := r.String()
	data := s[strings.LastIndexByte(s, '1')+1:]
	if len(data) < 6 {
		return nil, false
	}
	data = data[:len(data)-6]
	var (
		out  = make([]byte, 0, 32)
		acc  uint
		bits uint
	)
	for i := 0; i < len(data); i++ {
		v := strings.IndexByte(bech32Chars, data[i])
		if v < 0 {
			return nil, false
		}
		acc, bits = acc<<5|uint(v), bits+5
		if bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
			acc &= 1<<bits - 1
		}
	}
	if len(out) != 32 || bits >= 5 || acc != 0 {
		return nil, false
	}
	pub, err := ecdh.X25519().NewPublicKey(out)
	return pub, err == nil
}

// VetVerifier refuses an Ed25519 public key that is not the canonical
// encoding of a point on the curve, or that is a point of small order.
// crypto/ed25519 verifies signatures against such keys (RFC 8032 does not
// forbid them), but for a small-order key A, [k]A takes at most eight
// values whatever the message, and a signature can be made for any
// message without a private key: for the identity point, R = identity and
// S = 0 verify everything.
func VetVerifier(k ed25519.PublicKey) error {
	name := EncodeSignPublic(k)
	p, err := new(edwards25519.Point).SetBytes(k)
	if err != nil {
		return fault.Refusedf("signing key %s is not a point on the curve", name)
	}
	if !bytes.Equal(p.Bytes(), k) {
		return fault.Refusedf("signing key %s is not in canonical encoding", name)
	}
	if new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) == 1 {
		return fault.Refusedf("signing key %s is a point of small order: anyone can make signatures that verify against it", name)
	}
	return nil
}
