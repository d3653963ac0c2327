package keys

import (
	"crypto/ed25519"
	"encoding/hex"
	"strings"
	"testing"

	"filippo.io/edwards25519"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/testutil/badkeys"
)

// Keys Generate makes always pass.
func TestVetPassesGeneratedKeys(t *testing.T) {
	for range 50 {
		p, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Public().Vet(); err != nil {
			t.Fatal(err)
		}
	}
}

// An age key of low order and a signing key of small order parse, and Vet
// refuses each, naming it.
func TestVetRefusesKeysThatCannotBeTrusted(t *testing.T) {
	good, _ := Generate()
	for _, age := range badkeys.LowOrderAge {
		pub := good.Public()
		pub.Age = age
		if err := pub.Check(); err != nil {
			t.Fatalf("%s does not parse: %v", age, err)
		}
		err := pub.Vet()
		if fault.ClassOf(err) != fault.Refused || !strings.Contains(err.Error(), age) || !strings.Contains(err.Error(), "low order") {
			t.Errorf("age key %s: %v, want a refusal naming it", age, err)
		}
	}
	for _, h := range badkeys.SmallOrderSign {
		pub := good.Public()
		k, _ := hex.DecodeString(h)
		pub.Sign = EncodeSignPublic(k)
		if err := pub.Check(); err != nil {
			t.Fatalf("%s does not parse: %v", pub.Sign, err)
		}
		err := pub.Vet()
		if fault.ClassOf(err) != fault.Refused || !strings.Contains(err.Error(), pub.Sign) || !strings.Contains(err.Error(), "small order") {
			t.Errorf("signing key %s: %v, want a refusal naming it", pub.Sign, err)
		}
	}
}

// A signing key that is no point, or a point in the non-canonical encoding
// y + p, is refused too. Both are found among y = 2 .. 18, the only y
// whose y + p still fits in 255 bits.
func TestVetRefusesBadEncodings(t *testing.T) {
	var notPoint, nonCanonical ed25519.PublicKey
	for y := byte(2); y <= 18; y++ {
		k := make(ed25519.PublicKey, 32)
		k[0] = y
		if _, err := new(edwards25519.Point).SetBytes(k); err != nil {
			notPoint = k
			continue
		}
		// y + p = y - 19 + 2^255, in little-endian bytes.
		n := make(ed25519.PublicKey, 32)
		for i := range n {
			n[i] = 0xff
		}
		n[0], n[31] = y-19, 0x7f
		nonCanonical = n
	}
	if notPoint == nil || nonCanonical == nil {
		t.Fatal("test bug: no sample found")
	}
	for k, want := range map[string]string{EncodeSignPublic(notPoint): "not a point", EncodeSignPublic(nonCanonical): "canonical"} {
		v, _ := Public{Sign: k}.Verifier()
		if err := VetVerifier(v); fault.ClassOf(err) != fault.Refused || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), k) {
			t.Errorf("%s: %v, want a refusal saying %q", k, err, want)
		}
	}
}
