package curve

import (
	"bytes"
	"crypto/ecdh"
	"strings"
	"testing"

	"filippo.io/age"
)

// AgePoint gives the key age encrypts to: the public key of the scalar in the
// identity's own text form.
func TestPointIsTheRecipientsKey(t *testing.T) {
	for range 20 {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		scalar, err := decode(id.String(), "age-secret-key-")
		if err != nil {
			t.Fatal(err)
		}
		priv, err := ecdh.X25519().NewPrivateKey(scalar)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AgePoint(id.Recipient())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, priv.PublicKey().Bytes()) {
			t.Fatalf("%s: %x, want %x", id.Recipient(), got, priv.PublicKey().Bytes())
		}
	}
}

func TestDecode(t *testing.T) {
	a, _ := age.GenerateX25519Identity()
	pub := a.Recipient().String()
	if _, err := decode(pub, "age"); err != nil {
		t.Fatalf("%s: %v", pub, err)
	}
	if _, err := decode(a.String(), "age-secret-key-"); err != nil {
		t.Fatalf("secret key: %v", err)
	}
	bad := []byte(pub)
	bad[10] = 'q'
	if pub[10] == 'q' {
		bad[10] = 'p'
	}
	for _, s := range []string{string(bad), strings.ToUpper(pub[:5]) + pub[5:], "age1", pub[:len(pub)-1]} {
		if _, err := decode(s, "age"); err == nil {
			t.Errorf("%q decoded", s)
		}
	}
	if _, err := decode(pub, "age-secret-key-"); err == nil {
		t.Error("public key decoded as a secret key")
	}
}
