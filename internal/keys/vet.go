package keys

import (
	"bytes"
	"crypto/ed25519"

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
// every ephemeral scalar or with none: sealing one file key to the key, as
// age does, finds them.
func VetRecipient(r *age.X25519Recipient) error {
	if _, err := r.Wrap(make([]byte, 16)); err != nil {
		return fault.Refusedf("age key %s is a point of low order: nothing can be sealed to it", r)
	}
	return nil
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
