package bundle

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"testing"

	"filippo.io/age"

	"github.com/muster-tool/muster/internal/fault"
)

// The fuzz targets decode outside input with fixed keys. Whatever the input,
// decoding must not panic, every error must be a classified refusal, and
// anything accepted must be exactly what the signer signed: no input the
// signer did not produce may decode.

var fuzzCtx = Context{Kind: "declaration", Node: "n-fuzz", Name: "decl/n-fuzz/00000001"}

const fuzzPayload = "generation = 1\n\n[[resources]]\nkind = \"file\"\npath = \"/etc/motd\"\ncontent = \"hello\"\n"

func checkFuzzRefusal(t *testing.T, err error, what string) {
	t.Helper()
	if fault.ClassOf(err) != fault.Refused {
		t.Fatalf("%s: error not classed refused: %v", what, err)
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("%s: error wraps no sentinel: %v", what, err)
}

// mutations returns damaged copies of a valid bundle to seed the corpus.
func mutations(data []byte) [][]byte {
	h := bytes.IndexByte(data, '\n') + 1
	out := [][]byte{
		data[:h/2], data[:h], data[:h+10], data[:len(data)/2], data[:len(data)-1],
		append(bytes.Clone(data), 0),
		flip(data, 3, 1), flip(data, h+5, 2), flip(data, len(data)/2, 3), flip(data, len(data)-1, 0),
		bytes.Replace(data, []byte("/v1 "), []byte("/v2 "), 1),
	}
	return out
}

func FuzzOpen(f *testing.F) {
	mesh, attacker := testSigner("mesh"), testSigner("attacker")
	node, other := testIdentity(f, "node"), testIdentity(f, "other")
	p := []byte(fuzzPayload)

	valid := [][]byte{
		mustSeal(f, p, fuzzCtx, mesh, node.Recipient()),
		mustSeal(f, p, fuzzCtx, mesh, other.Recipient(), node.Recipient()),
		mustSeal(f, p, fuzzCtx, mesh, node.Recipient(), testIdentity(f, "mesh").Recipient()),
	}
	for _, v := range valid {
		f.Add(v)
		for _, m := range mutations(v) {
			f.Add(m)
		}
	}
	f.Add(mustSeal(f, p, fuzzCtx, attacker, node.Recipient()))
	f.Add(mustSeal(f, p, fuzzCtx, mesh, other.Recipient()))
	f.Add(mustSeal(f, p, Context{Kind: "report", Node: fuzzCtx.Node, Name: fuzzCtx.Name}, mesh, node.Recipient()))
	f.Add(mustSign(f, p, fuzzCtx, mesh))
	f.Add(wrapSealed(f, craftRecord(Signed, 1, mesh, fuzzCtx, compressed(f, p)), node.Recipient()))
	f.Add([]byte{})
	f.Add([]byte("muster-bundle/v1 sealed 0\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		checkOpen(t, data, node, mesh, valid)
		// Most mutations break the body length in the header line and stop
		// there; the same input with its header line repaired reaches the
		// age and record parsers.
		checkOpen(t, withHeaderLine(data, Sealed), node, mesh, valid)
	})
}

func checkOpen(t *testing.T, data []byte, node age.Identity, mesh ed25519.PrivateKey, valid [][]byte) {
	got, err := Open(data, fuzzCtx, node, pub(mesh))
	if err != nil {
		checkFuzzRefusal(t, err, "Open")
	} else if string(got) != fuzzPayload {
		t.Fatalf("Open accepted a payload the signer never signed: %q", got)
	}
	for _, v := range valid {
		if bytes.Equal(data, v) && err != nil {
			t.Fatalf("Open refused an unmodified bundle: %v", err)
		}
	}
	fromGot, signer, ferr := OpenFrom(data, fuzzCtx, node)
	if (ferr == nil) != (err == nil) && !errors.Is(err, ErrUnexpectedSigner) {
		t.Fatalf("Open and OpenFrom disagree: %v / %v", err, ferr)
	}
	if ferr != nil {
		checkFuzzRefusal(t, ferr, "OpenFrom")
	} else if signer.Equal(pub(mesh)) && string(fromGot) != fuzzPayload {
		t.Fatalf("OpenFrom accepted a payload the signer never signed: %q", fromGot)
	}
	h, ierr := Inspect(data)
	if ierr != nil {
		checkFuzzRefusal(t, ierr, "Inspect")
		if err == nil {
			t.Fatalf("Open accepted a bundle Inspect refuses: %v", ierr)
		}
	} else if h.Size != len(data) {
		t.Fatalf("Inspect size %d of %d bytes", h.Size, len(data))
	}
}

// withHeaderLine replaces what looks like a header line at the start of
// data, if anything, by a valid one for mode m and the rest's length.
func withHeaderLine(data []byte, m Mode) []byte {
	body := data
	if line, rest, ok := bytes.Cut(data, []byte{'\n'}); ok && len(line) < headerMax && bytes.HasPrefix(line, []byte(headerPrefix)) {
		body = rest
	}
	return append(appendHeaderLine(nil, m, len(body)), body...)
}

func FuzzOpenSigned(f *testing.F) {
	mesh, attacker := testSigner("mesh"), testSigner("attacker")
	p := []byte(fuzzPayload)
	valid := mustSign(f, p, fuzzCtx, mesh)
	f.Add(valid)
	for _, m := range mutations(valid) {
		f.Add(m)
	}
	f.Add(mustSign(f, p, fuzzCtx, attacker))
	f.Add(mustSign(f, p, keysCtx, mesh))
	f.Add(mustSign(f, []byte{}, keysCtx, mesh))
	f.Add(mustSeal(f, p, fuzzCtx, mesh, testIdentity(f, "node").Recipient()))
	f.Add(wrapSigned(craftRecord(Signed, 1, mesh, fuzzCtx, append(compressed(f, p), 0))))
	f.Add(wrapSigned(craftRecord(Sealed, 1, mesh, fuzzCtx, compressed(f, p))))

	f.Fuzz(func(t *testing.T, data []byte) {
		checkOpenSigned(t, data, mesh, valid)
		checkOpenSigned(t, withHeaderLine(data, Signed), mesh, valid)
	})
}

func checkOpenSigned(t *testing.T, data []byte, mesh ed25519.PrivateKey, valid []byte) {
	got, err := OpenSigned(data, fuzzCtx, pub(mesh))
	if err != nil {
		checkFuzzRefusal(t, err, "OpenSigned")
	} else if string(got) != fuzzPayload {
		t.Fatalf("OpenSigned accepted a payload the signer never signed: %q", got)
	}
	if bytes.Equal(data, valid) && err != nil {
		t.Fatalf("OpenSigned refused an unmodified bundle: %v", err)
	}
	h, ierr := Inspect(data)
	if ierr != nil {
		checkFuzzRefusal(t, ierr, "Inspect")
		if err == nil {
			t.Fatalf("OpenSigned accepted a bundle Inspect refuses: %v", ierr)
		}
		return
	}
	// Inspect checks a signed bundle's own signature, so what it
	// accepts from the mesh key is exactly what OpenSigned accepts
	// for the right context.
	if h.Signer.Equal(pub(mesh)) && h.Context == fuzzCtx && err != nil {
		t.Fatalf("Inspect accepts what OpenSigned refuses: %v", err)
	}
}

// FuzzDecompress feeds payload frames straight to the decompressor. A bundle
// decoded with OpenFrom may be signed by anyone, so its payload is outside
// input even though its signature verifies.
func FuzzDecompress(f *testing.F) {
	for _, p := range [][]byte{{}, []byte(fuzzPayload), bytes.Repeat([]byte("ab"), 70000), randomBytes(f, 3000)} {
		c := compressed(f, p)
		f.Add(c, uint32(len(p)))
		f.Add(c, uint32(len(p)-len(p)/2))
		f.Add(append(bytes.Clone(c), c...), uint32(2*len(p)))
	}
	f.Add([]byte{0x28, 0xB5, 0x2F, 0xFD, 0x20, 100, 0x0B, 0, 0x10, 'A'}, uint32(1000))
	f.Fuzz(func(t *testing.T, frame []byte, limit uint32) {
		limit %= 1 << 20
		out, err := decompress(frame, int(limit), "fuzz")
		if err != nil {
			checkFuzzRefusal(t, err, "decompress")
			return
		}
		if len(out) > int(limit) {
			t.Fatalf("decompressed %d bytes past the limit %d", len(out), limit)
		}
		fi, err := checkFrame(frame, int(limit), "fuzz")
		if err != nil || fi.contentSize != len(out) {
			t.Fatalf("accepted frame: declared %d, got %d, %v", fi.contentSize, len(out), err)
		}
	})
}
