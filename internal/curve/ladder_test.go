package curve

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
)

// The ladder and the table-based share agree with crypto/ecdh on random
// scalars and points.
func TestX25519AgreesWithECDH(t *testing.T) {
	for i := range 200 {
		var k [32]byte
		rand.Read(k[:])
		priv, err := ecdh.X25519().NewPrivateKey(k[:])
		if err != nil {
			t.Fatal(err)
		}
		want := priv.PublicKey().Bytes()
		for _, fromTable := range []bool{false, true} {
			if got := x25519Share(&k, fromTable); hex.EncodeToString(got) != hex.EncodeToString(want) {
				t.Fatalf("share %d of %x (from the table: %v): %x, crypto/ecdh %x", i, k, fromTable, got, want)
			}
		}
		peer, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		secret, err := priv.ECDH(peer.PublicKey())
		if err != nil {
			t.Fatal(err)
		}
		got, err := x25519Secret(&k, peer.PublicKey().Bytes())
		if err != nil || hex.EncodeToString(got) != hex.EncodeToString(secret) {
			t.Fatalf("secret %d: %x, %v; crypto/ecdh %x", i, got, err, secret)
		}
	}
}

// RFC 7748 section 5.2: the function iterated from k = u = 9.
func TestX25519RFC7748Iterated(t *testing.T) {
	k, u := [32]byte{9}, [32]byte{9}
	want := map[int]string{
		1:    "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079",
		1000: "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51",
	}
	for i := 1; i <= 1000; i++ {
		out := x25519Ladder(&k, u[:])
		u, k = k, out
		if w, ok := want[i]; ok && hex.EncodeToString(k[:]) != w {
			t.Fatalf("after %d iterations: %x, want %s", i, k, w)
		}
	}
}

// A point of small order gives the all-zero secret, which is refused: the
// file key would be sealed under a key anyone can compute.
func TestX25519LowOrderRefused(t *testing.T) {
	var k [32]byte
	rand.Read(k[:])
	for _, u := range []string{
		"0000000000000000000000000000000000000000000000000000000000000000",
		"0100000000000000000000000000000000000000000000000000000000000000",
		"e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
	} {
		p, _ := hex.DecodeString(u)
		if _, err := x25519Secret(&k, p); !errors.Is(err, errLowOrder) {
			t.Errorf("point %s: %v, want it refused", u, err)
		}
	}
}
