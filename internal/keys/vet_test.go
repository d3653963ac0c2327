package keys

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"math/big"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"
	"filippo.io/age/plugin"
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

// x25519Point reads the bytes age encoded: for keys made by crypto/ecdh
// and encoded by age, it gives back the key's bytes.
func TestX25519PointReadsWhatAgeEncodes(t *testing.T) {
	for range 200 {
		k, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		s, err := plugin.EncodeX25519Recipient(k.PublicKey())
		if err != nil {
			t.Fatal(err)
		}
		r, err := age.ParseX25519Recipient(s)
		if err != nil {
			t.Fatal(err)
		}
		pub, ok := x25519Point(r)
		if !ok || !pub.Equal(k.PublicKey()) {
			t.Fatalf("%s: read %v, %x; want %x", s, ok, pub.Bytes(), k.PublicKey().Bytes())
		}
	}
}

// VetRecipient refuses exactly the keys age will not seal to. Every point
// of low order is tried, in every encoding X25519 reads as it: u = 0, 1
// and -1, the two points of order 8, u = p and p + 1, each also with the
// top bit set, which X25519 ignores; and random keys, each also with the
// top bit set.
func TestVetRecipientRefusesWhatAgeRefuses(t *testing.T) {
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	order8a, _ := new(big.Int).SetString("325606250916557431795983626356110631294008115727848805560023387167927233504", 10)
	order8b, _ := new(big.Int).SetString("39382357235489614581723060781553021112529911719440698176882885853963445705823", 10)
	low := []*big.Int{big.NewInt(0), big.NewInt(1), new(big.Int).Sub(p, big.NewInt(1)), order8a, order8b, p, new(big.Int).Add(p, big.NewInt(1))}
	var points [][]byte
	for _, u := range low {
		b := make([]byte, 32)
		u.FillBytes(b)
		slices.Reverse(b) // X25519 keys are little-endian
		points = append(points, b)
	}
	for range 20 {
		b := make([]byte, 32)
		rand.Read(b)
		b[31] &= 0x7f
		points = append(points, b)
	}
	refused := 0
	for _, b := range points {
		for _, top := range []byte{0, 0x80} {
			b := slices.Clone(b)
			b[31] |= top
			pub, err := ecdh.X25519().NewPublicKey(b)
			if err != nil {
				t.Fatal(err)
			}
			s, err := plugin.EncodeX25519Recipient(pub)
			if err != nil {
				t.Fatal(err)
			}
			r, err := age.ParseX25519Recipient(s)
			if err != nil {
				t.Fatal(err)
			}
			_, wrapErr := r.Wrap(make([]byte, 16))
			vetErr := VetRecipient(r)
			if (wrapErr == nil) != (vetErr == nil) {
				t.Errorf("%x: age says %v, VetRecipient says %v", b, wrapErr, vetErr)
			}
			if vetErr != nil {
				refused++
			}
		}
	}
	if refused != 2*len(low) {
		t.Errorf("refused %d keys; want the %d of low order", refused, 2*len(low))
	}
}
