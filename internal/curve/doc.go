// Package curve holds every piece of Curve25519 code muster writes itself
// instead of calling the standard library or age, so that a reviewer finds
// all of it in one place. Everything else signs, verifies, seals and opens
// through crypto/ed25519 and filippo.io/age; every signature muster checks
// is checked by crypto/ed25519.Verify.
//
// What is written here, and why:
//
//   - Sign, Batch.Sign and NewKeyFromSeed (ed25519.go) make crypto/ed25519's
//     keys and signatures without the table of base-point multiples that
//     crypto/ed25519 builds the first time a process signs: a command that
//     signs once or twice, as apply does on every run, would spend more on
//     the table than on its signatures. The scalar multiplication is the
//     constant-time one of filippo.io/edwards25519, the code crypto/ed25519
//     is built from; only RFC 8032's signing formula is written here. A
//     Batch for many signatures calls crypto/ed25519 itself.
//   - Batch.Recipients (x25519.go) writes age's X25519 recipient stanza with
//     one RFC 7748 ladder for the shared secret (ladder.go) plus the
//     ephemeral share, a ladder too or, in a Batch for many, taken from
//     edwards25519's fixed-base table, where age's X25519Recipient spends
//     more scalar multiplications: declare seals one bundle per node.
//     Opening is left to age's own X25519Identity.
//   - AgePoint (agekey.go) decodes the Bech32 text of an age key to the 32
//     bytes age keeps unexported, which Recipients and key vetting
//     (internal/keys) compute with.
//
// Whether to use a table is the operation's choice (BatchOf), made from how
// many signatures and seals it makes, so that a call costs the same
// whatever the process did before it. The README's Performance section
// has the measurements of whole commands behind each piece and each
// choice.
//
// The tests hold every piece to the standard on every run: both Ed25519
// paths against crypto/ed25519, byte for byte, and RFC 8032's vector; the
// ladder and both ways of making the share against crypto/ecdh, and RFC
// 7748's vectors, with low-order points refused; the stanza, either way,
// opened by age's own identity and by no other; AgePoint against the
// public key crypto/ecdh derives from the identity's scalar.
package curve
