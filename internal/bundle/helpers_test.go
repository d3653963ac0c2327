package bundle

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/BurntSushi/toml"
)

// Keys derived from fixed seeds, so that committed test vectors and fuzz
// corpus files stay valid. They protect nothing.
func testSigner(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("muster bundle test signer " + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

func testIdentity(t testing.TB, name string) *age.X25519Identity {
	t.Helper()
	id, err := age.ParseX25519Identity(testIdentities[name])
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Fixed age identities for the same reason.
var testIdentities = map[string]string{
	"node":  "AGE-SECRET-KEY-1CFMHANHEFP7HNX2G2N5V5DCJAJCLTQP0J652X9X27QCK7DZFF9KQYSRA6A",
	"mesh":  "AGE-SECRET-KEY-1YNLVC2AZ0GMWSLN2W5FVXN8SS0U9MR795DQ73Z39YCDRDHDPZ7EQUJWZZ5",
	"other": "AGE-SECRET-KEY-188UPYW69A92GLKSGYCAU97TPZ6N6R22U2VR394W8P26P5FGMZ9QSCC9WNN",
}

// declaration is shaped like the documents muster seals most often.
type declaration struct {
	Generation int
	Node       string
	Resources  []declResource
}

type declResource struct {
	Kind    string
	Name    string
	Path    string `toml:",omitempty"`
	Mode    string `toml:",omitempty"`
	Version string `toml:",omitempty"`
	Content string `toml:",omitempty"`
}

// testDeclaration builds a declaration whose TOML is about size bytes.
func testDeclaration(size int) declaration {
	d := declaration{Generation: 42, Node: "n-7f3a9c"}
	for i := 0; ; i++ {
		b, err := toml.Marshal(d)
		if err != nil {
			panic(err)
		}
		if len(b) >= size {
			return d
		}
		if i%3 == 0 {
			d.Resources = append(d.Resources, declResource{Kind: "package", Name: fmt.Sprintf("pkg-%d", i), Version: fmt.Sprintf("1.%d.%d-1", i, i*7)})
			continue
		}
		var content strings.Builder
		for j := range 6 {
			fmt.Fprintf(&content, "setting_%d_%d = %q\n", i, j, strings.Repeat(string(rune('a'+(i+j)%26)), 5+j))
		}
		d.Resources = append(d.Resources, declResource{
			Kind: "file", Name: fmt.Sprintf("config-%d", i),
			Path: fmt.Sprintf("/etc/service-%d/config.toml", i), Mode: "0644",
			Content: content.String(),
		})
	}
}

func mustTOML(t testing.TB, v any) []byte {
	t.Helper()
	b, err := toml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
