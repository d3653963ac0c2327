package curve

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"testing"
)

// The own path makes crypto/ed25519's keys and signatures, byte for
// byte. It is called directly, so every run tests it whatever the order
// of tests and however many keys the process made before.
func TestOwnPathSameAsStandardLibrary(t *testing.T) {
	for i := range 200 {
		sameAsStandardLibrary(t, i, newKeyFromSeed, sign)
	}
}

// Every Batch signs as crypto/ed25519 does, with the table and without,
// and so do Sign and NewKeyFromSeed.
func TestBatchSignsAsStandardLibrary(t *testing.T) {
	for _, b := range []Batch{BatchOf(1), BatchOf(10000)} {
		for i := range 50 {
			sameAsStandardLibrary(t, i, NewKeyFromSeed, b.Sign)
		}
	}
	for i := range 50 {
		sameAsStandardLibrary(t, i, NewKeyFromSeed, Sign)
	}
}

// sameAsStandardLibrary makes key and signature number i, of a message of
// a length that varies with i, and compares both with crypto/ed25519's.
func sameAsStandardLibrary(t *testing.T, i int, newKey func([]byte) ed25519.PrivateKey, signWith func(ed25519.PrivateKey, []byte) []byte) {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	rand.Read(seed)
	msg := make([]byte, i*37%1500)
	rand.Read(msg)
	want := ed25519.NewKeyFromSeed(seed)
	got := newKey(seed)
	if !got.Equal(want) {
		t.Fatalf("key %d: %x, want %x", i, got, want)
	}
	if sig, wantSig := signWith(got, msg), ed25519.Sign(want, msg); string(sig) != string(wantSig) {
		t.Fatalf("signature %d: %x, want %x", i, sig, wantSig)
	}
}

// RFC 8032, section 7.1, TEST 3, on the own path.
func TestVector(t *testing.T) {
	seed := unhex(t, "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7")
	priv := newKeyFromSeed(seed)
	if got, want := priv[32:], unhex(t, "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025"); string(got) != string(want) {
		t.Errorf("public key %x, want %x", got, want)
	}
	sig := sign(priv, unhex(t, "af82"))
	want := unhex(t, "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a")
	if string(sig) != string(want) {
		t.Errorf("signature %x, want %x", sig, want)
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
