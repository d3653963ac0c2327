package curve

import (
	"crypto/ed25519"
	"crypto/sha512"

	"filippo.io/edwards25519"
)

// NewKeyFromSeed is ed25519.NewKeyFromSeed, byte for byte, without
// crypto/ed25519's table: a process derives its key once. It panics, as
// that does, if seed is not ed25519.SeedSize bytes.
func NewKeyFromSeed(seed []byte) ed25519.PrivateKey {
	if len(seed) != ed25519.SeedSize {
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

// sign is ed25519.Sign without crypto/ed25519's table: RFC 8032's
// signing, with edwards25519's constant-time multiplication of any point in
// place of the table-based one of the base point, for a private key of the
// right size.
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
