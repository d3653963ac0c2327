package badkeys

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"filippo.io/age"
	"filippo.io/edwards25519"

	"github.com/muster-tool/muster/internal/bundle"
)

// The keys are what they say: every age key parses and age refuses to seal
// to it; every signing key is a point of small order.
func TestKeysAreWhatTheySay(t *testing.T) {
	for _, s := range LowOrderAge {
		r, err := age.ParseX25519Recipient(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if _, err := r.Wrap(make([]byte, 16)); err == nil {
			t.Errorf("%s: age seals to it", s)
		}
	}
	for _, s := range SmallOrderSign {
		p, err := new(edwards25519.Point).SetBytes(mustHex(s))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) != 1 {
			t.Errorf("%s is not of small order", s)
		}
	}
}

// The forged signature verifies under Identity with crypto/ed25519 for any
// message.
func TestForgedSignatureVerifies(t *testing.T) {
	for range 10 {
		msg := make([]byte, 40)
		rand.Read(msg)
		if !ed25519.Verify(Identity(), msg, forgedSignature()) {
			t.Fatal("forged signature does not verify")
		}
	}
}

// Forged bundles open: the signature checks pass, so a refusal of them
// elsewhere is the refusal of the key.
func TestForgedBundlesOpen(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	c := bundle.Context{Kind: "test", Name: "x"}
	signed, err := bundle.Sign([]byte("payload"), c, priv)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := bundle.OpenSigned(ForgeSigned(signed), c, Identity()); err != nil || string(p) != "payload" {
		t.Fatalf("forged signed bundle: %q, %v", p, err)
	}
	id, _ := age.GenerateX25519Identity()
	if p, err := bundle.Open(ForgeSealed(signed, id.Recipient()), c, id, Identity()); err != nil || string(p) != "payload" {
		t.Fatalf("forged sealed bundle: %q, %v", p, err)
	}
}
