// Package bundle owns the format of every object muster writes to the spool,
// and is the only place that format is coded.
//
// A bundle carries a TOML payload compressed with zstd and signed with the
// author's ed25519 key over a domain-separated message that binds it to its
// Context (kind, node and spool name). In sealed mode the signed record is
// then encrypted with age to its readers; in signed mode, used only for public
// records that hold no secrets and no host names, it is stored in the clear.
// A one-line plain-text header names the format, version, mode and body
// length so that a spool can be checked for damaged or partial objects
// without any key. Decoding refuses anything that is not exactly what an
// honest writer produces, with an error that says which check failed; the
// byte layout is specified in muster-bundle(5).
package bundle
