package curve

import (
	"crypto/subtle"
	"errors"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
)

// Sealing to an X25519 recipient takes an ephemeral scalar, its public
// share X25519(k, 9) and the shared secret X25519(k, recipient).
// crypto/ecdh computes the share whenever it makes a private key, so
// making one and then taking the secret costs two Montgomery ladders
// whatever the share is computed with. These functions take the scalar as
// bytes instead: the secret is one ladder (RFC 7748, section 5), and the
// share is a ladder too or, in a Batch that seals many, comes from a
// fixed-base table on the Edwards form of the curve, which is cheaper once
// the table is built. Tests check both against crypto/ecdh and against RFC
// 7748's vectors.

var basepoint = [32]byte{9}

// x25519Share returns X25519(k, 9), the public share of scalar k, with
// the ladder or, with fromTable, from edwards25519's table of base-point
// multiples.
func x25519Share(k *[32]byte, fromTable bool) []byte {
	if !fromTable {
		out := x25519Ladder(k, basepoint[:])
		return out[:]
	}
	// [k]B on the Edwards curve, read as the Montgomery u-coordinate:
	// the base points correspond, and k reduced mod the group order
	// names the same multiple as the clamped k.
	s, err := edwards25519.NewScalar().SetBytesWithClamping(k[:])
	if err != nil {
		panic("curve: clamping a 32-byte scalar: " + err.Error())
	}
	return new(edwards25519.Point).ScalarBaseMult(s).BytesMontgomery()
}

// errLowOrder is X25519's all-zero output: the peer's point has small
// order, and the secret would not depend on the scalar.
var errLowOrder = errors.New("bad X25519 remote input: low order point")

// x25519Secret returns X25519(k, peer), refusing the all-zero output as
// crypto/ecdh does.
func x25519Secret(k *[32]byte, peer []byte) ([]byte, error) {
	out := x25519Ladder(k, peer)
	var zero [32]byte
	if subtle.ConstantTimeCompare(out[:], zero[:]) == 1 {
		return nil, errLowOrder
	}
	return out[:], nil
}

// x25519Ladder is the X25519 function of RFC 7748: the scalar is clamped,
// the top bit of u is ignored, and every step is constant-time.
func x25519Ladder(k *[32]byte, u []byte) [32]byte {
	var e [32]byte
	copy(e[:], k[:])
	e[0] &= 248
	e[31] &= 127
	e[31] |= 64

	var x1, x2, z2, x3, z3, a, aa, b, bb, ee, c, d, da, cb field.Element
	if _, err := x1.SetBytes(u); err != nil {
		panic("curve: X25519 point is not 32 bytes")
	}
	x2.One()
	z2.Zero()
	x3.Set(&x1)
	z3.One()
	swap := 0
	for pos := 254; pos >= 0; pos-- {
		bit := int(e[pos/8]>>(pos&7)) & 1
		swap ^= bit
		x2.Swap(&x3, swap)
		z2.Swap(&z3, swap)
		swap = bit

		a.Add(&x2, &z2)
		aa.Square(&a)
		b.Subtract(&x2, &z2)
		bb.Square(&b)
		ee.Subtract(&aa, &bb)
		c.Add(&x3, &z3)
		d.Subtract(&x3, &z3)
		da.Multiply(&d, &a)
		cb.Multiply(&c, &b)
		x3.Add(&da, &cb)
		x3.Square(&x3)
		z3.Subtract(&da, &cb)
		z3.Square(&z3)
		z3.Multiply(&z3, &x1)
		x2.Multiply(&aa, &bb)
		// z2 = E * (BB + 121666 E), which is RFC 7748's
		// E * (AA + 121665 E) since AA = BB + E.
		z2.Mult32(&ee, 121666)
		z2.Add(&z2, &bb)
		z2.Multiply(&z2, &ee)
	}
	x2.Swap(&x3, swap)
	z2.Swap(&z3, swap)

	var out [32]byte
	z2.Invert(&z2)
	copy(out[:], x2.Multiply(&x2, &z2).Bytes())
	return out
}
