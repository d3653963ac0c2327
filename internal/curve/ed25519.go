package curve

import (
	"crypto/ed25519"
	"crypto/sha512"
	"sync/atomic"

	"filippo.io/edwards25519"
)

// tableAfter is how many keys and signatures a process makes without
// crypto/ed25519's table.
const tableAfter = 16

var uses atomic.Int64

// withTable reports whether this operation should go to crypto/ed25519.
func withTable() bool { return uses.Add(1) > tableAfter }

// NewKeyFromSeed is ed25519.NewKeyFromSeed. It panics, as that does, if
// seed is not ed25519.SeedSize bytes.
func NewKeyFromSeed(seed []byte) ed25519.PrivateKey {
	if len(seed) != ed25519.SeedSize || withTable() {
		return ed25519.NewKeyFromSeed(seed)
	}
	return newKeyFromSeed(seed)
}

// newKeyFromSeed is NewKeyFromSeed without the table, for a seed of the
// right size.
func newKeyFromSeed(seed []byte) ed25519.PrivateKey {
	h := sha512.Sum512(seed)
	s, err := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	if err != nil {
		panic("curve: " + err.Error())
	}
	pub := new(edwards25519.Point).ScalarMult(s, edwards25519.NewGeneratorPoint()).Bytes()
	priv := make(ed25519.PrivateKey, ed25519.PrivateKeySize)
	copy(priv, seed)
	copy(priv[ed25519.SeedSize:], pub)
	return priv
}

// Sign is ed25519.Sign (pure Ed25519, RFC 8032). It panics, as that does,
// if priv is not ed25519.PrivateKeySize bytes.
func Sign(priv ed25519.PrivateKey, msg []byte) []byte {
	if len(priv) != ed25519.PrivateKeySize || withTable() {
		return ed25519.Sign(priv, msg)
	}
	return sign(priv, msg)
}

// sign is Sign without the table, for a private key of the right size.
func sign(priv ed25519.PrivateKey, msg []byte) []byte {
	seed, pub := priv[:ed25519.SeedSize], priv[ed25519.SeedSize:]
	h := sha512.Sum512(seed)
	s, err := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	if err != nil {
		panic("curve: " + err.Error())
	}
	d := sha512.New()
	d.Write(h[32:])
	d.Write(msg)
	var buf [sha512.Size]byte
	r, err := edwards25519.NewScalar().SetUniformBytes(d.Sum(buf[:0]))
	if err != nil {
		panic("curve: " + err.Error())
	}
	R := new(edwards25519.Point).ScalarMult(r, edwards25519.NewGeneratorPoint()).Bytes()
	d.Reset()
	d.Write(R)
	d.Write(pub)
	d.Write(msg)
	k, err := edwards25519.NewScalar().SetUniformBytes(d.Sum(buf[:0]))
	if err != nil {
		panic("curve: " + err.Error())
	}
	S := edwards25519.NewScalar().MultiplyAdd(k, s, r)
	sig := make([]byte, 0, ed25519.SignatureSize)
	return append(append(sig, R...), S.Bytes()...)
}
