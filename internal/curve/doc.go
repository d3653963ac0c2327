// Package curve holds every piece of Curve25519 code muster writes itself
// instead of calling the standard library or age, so that a reviewer finds
// all of it in one place. Everything else signs, verifies, seals and opens
// through crypto/ed25519 and filippo.io/age; every signature muster checks
// is checked by crypto/ed25519.Verify.
//
// What is written here, and why:
//
//   - Sign and NewKeyFromSeed (ed25519.go) make crypto/ed25519's keys and
//     signatures without the table of base-point multiples that
//     crypto/ed25519 builds the first time a process signs. A command that
//     signs once or twice, as apply does on every run, would spend more on
//     the table than on its signature. The scalar multiplication is the
//     constant-time one of filippo.io/edwards25519, the code crypto/ed25519
//     is built from; only RFC 8032's signing formula is written here.
//   - Recipients (x25519.go) writes age's X25519 recipient stanza with one
//     RFC 7748 ladder for the shared secret plus the ephemeral share (a
//     ladder, or a fixed-base table on the Edwards form of the curve, see
//     ladder.go), where age's X25519Recipient spends more scalar
//     multiplications: declare seals one bundle per node. Opening is left
//     to age's own X25519Identity.
//   - AgePoint (agekey.go) decodes the Bech32 text of an age key to the 32
//     bytes age keeps unexported, which Recipients and key vetting
//     (internal/keys) compute with.
//
// The README's Performance section has the measurements of whole commands
// that keep each piece. The tests hold each to the standard: the own
// Ed25519 path against crypto/ed25519, byte for byte, on every run, and
// RFC 8032's vector; the ladder and the table-based share against
// crypto/ecdh and RFC 7748's vectors, with low-order points refused; the
// stanza opened by age's own identity, and by no other; AgePoint against
// the public key crypto/ecdh derives from the identity's scalar.
package curve
