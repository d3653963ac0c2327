// Package badkeys holds public keys that parse but must never be trusted,
// and forges bundles "signed" by one of them, for tests that tamper for
// real: a host that crafts its join request by hand, or a spool whose mesh
// keys were made by hand.
package badkeys

import (
	"bytes"
	"encoding/hex"
	"fmt"

	"filippo.io/age"
)

// LowOrderAge are age X25519 keys that are points of low order: the
// shared secret with any of them is zero, so nothing can be sealed to
// them. They are u = 0, u = 1 and a point of order 8.
var LowOrderAge = []string{
	"age1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq5cu47z",
	"age1qyqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqj7vrya",
	"age1ur4h5lpmgxu2u9jku0a0r87ydtdqnr0tnsetrlvxvgz3vh6fhqqqzyt4v9",
}

// SmallOrderSign are Ed25519 public keys, hex-encoded, that are points of
// small order: the identity, the point of order 2, and points of order 4
// and 8.
var SmallOrderSign = []string{
	"0100000000000000000000000000000000000000000000000000000000000000",
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"0000000000000000000000000000000000000000000000000000000000000080",
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
}

// Identity is the Ed25519 identity point as a public key, the first of
// SmallOrderSign: the key Forge signs with.
func Identity() []byte { return mustHex(SmallOrderSign[0]) }

// forgedSignature verifies under Identity for every message: with A the
// identity, [S]B = R + [k]A holds for R the identity and S = 0, whatever k.
func forgedSignature() []byte {
	return append(mustHex(SmallOrderSign[0]), make([]byte, 32)...)
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// Layout of a bundle (muster-bundle(5)): a header line, then for a signed
// bundle the signed record, whose byte 0 is the version, bytes 1 to 32 the
// signer key, and the last 64 bytes the signature.
const (
	signerAt  = 1
	signerEnd = 33
	sigSize   = 64
)

// ForgeSigned takes a signed bundle made with any key and returns it
// signed by Identity instead: the signer field and the signature are
// replaced, and the signature verifies without any private key.
func ForgeSigned(signed []byte) []byte {
	nl := bytes.IndexByte(signed, '\n')
	if nl < 0 || !bytes.HasPrefix(signed, []byte("muster-bundle/v1 signed ")) {
		panic("badkeys: not a signed bundle")
	}
	out := bytes.Clone(signed)
	rec := out[nl+1:]
	copy(rec[signerAt:signerEnd], Identity())
	copy(rec[len(rec)-sigSize:], forgedSignature())
	return out
}

// ForgeSealed takes a signed bundle made with any key, forges it as
// ForgeSigned does, and seals its record to r as a sealed bundle. The
// signature covers the mode, and the forged one verifies for any message,
// so the result is a valid sealed bundle signed by Identity.
func ForgeSealed(signed []byte, r age.Recipient) []byte {
	forged := ForgeSigned(signed)
	rec := forged[bytes.IndexByte(forged, '\n')+1:]
	var body bytes.Buffer
	w, err := age.Encrypt(&body, r)
	if err != nil {
		panic(err)
	}
	w.Write(rec)
	if err := w.Close(); err != nil {
		panic(err)
	}
	return append([]byte(fmt.Sprintf("muster-bundle/v1 sealed %d\n", body.Len())), body.Bytes()...)
}
