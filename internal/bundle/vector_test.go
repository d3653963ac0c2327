package bundle

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

var updateVectors = flag.Bool("update-vectors", false, "rewrite the bundle test vectors and fuzz seeds in testdata")

// The committed vectors are bundles written by this format version. They
// must keep opening: objects already in a spool outlive the muster that
// wrote them. A second implementation can test itself against them.
var vectors = []struct {
	file string
	ctx  Context
	mode Mode
}{
	{"v1-sealed.bundle", declCtx, Sealed},
	{"v1-signed.bundle", keysCtx, Signed},
}

const vectorPayloadFile = "v1-payload.toml"

func TestVectors(t *testing.T) {
	mesh, node := testSigner("mesh"), testIdentity(t, "node")
	if *updateVectors {
		writeVectors(t)
	}
	want, err := os.ReadFile(filepath.Join("testdata", vectorPayloadFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors {
		data, err := os.ReadFile(filepath.Join("testdata", v.file))
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		if v.mode == Sealed {
			got, err = Open(data, v.ctx, node, pub(mesh))
		} else {
			got, err = OpenSigned(data, v.ctx, pub(mesh))
		}
		if err != nil {
			t.Fatalf("%s: %v", v.file, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: payload differs from %s", v.file, vectorPayloadFile)
		}
	}
}

func writeVectors(t *testing.T) {
	mesh, node := testSigner("mesh"), testIdentity(t, "node")
	p := mustTOML(t, testDeclaration(1<<10))
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join("testdata", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(vectorPayloadFile, p)
	sealed := mustSeal(t, p, declCtx, mesh, node.Recipient())
	signed := mustSign(t, p, keysCtx, mesh)
	write(vectors[0].file, sealed)
	write(vectors[1].file, signed)
	seed := func(target, name string, b []byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		corpus := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(corpus), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fp := []byte(fuzzPayload)
	seed("FuzzOpen", "valid", mustSeal(t, fp, fuzzCtx, mesh, node.Recipient()))
	seed("FuzzOpen", "valid-three-recipients", mustSeal(t, fp, fuzzCtx, mesh, node.Recipient(), testIdentity(t, "other").Recipient(), testIdentity(t, "mesh").Recipient()))
	seed("FuzzOpenSigned", "valid", mustSign(t, fp, fuzzCtx, mesh))
}

// The manual specifies the format for other implementations; its numbers
// must be the ones the code enforces.
func TestManualStatesLimits(t *testing.T) {
	man, err := os.ReadFile(filepath.Join("..", "..", "man", "muster-bundle.5"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		strconv.Itoa(MaxPayload), strconv.Itoa(MaxCompressed), strconv.Itoa(MaxWindow),
		strconv.Itoa(MaxBody), strconv.Itoa(MaxContextField), strconv.Itoa(headerMax),
		strconv.Itoa(innerFixed) + " + K + N + M + P", strconv.Itoa(innerFixed+1) + " bytes",
		`"` + signatureDomain + `" || NUL || mode || NUL`,
		`"` + headerPrefix + `v" version SP mode SP length LF`,
	} {
		if !bytes.Contains(man, []byte(want)) {
			t.Errorf("muster-bundle(5) does not state %q", want)
		}
	}
}
