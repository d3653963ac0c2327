package keys

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// A Sealer authenticates text files that only the holder of a signing
// key may write, under a key derived from the key's seed and a label (one
// label per kind of file, so that a file of one kind never opens as
// another): the host's state files, and a pair's public-key file. Seal
// ends the text in the line
//
//	# mac: hmac-sha256 5e1a...
//
// and Open checks it. A Sealer is the project's one use of HMAC.
type Sealer []byte

// MACPrefix starts the authenticating line.
const MACPrefix = "# mac: hmac-sha256 "

// NewSealer derives the sealer of label from seed.
func NewSealer(seed []byte, label string) (Sealer, error) {
	return hkdf.Key(sha256.New, seed, nil, label, 32)
}

func (k Sealer) mac(body []byte) []byte {
	m := hmac.New(sha256.New, k)
	m.Write(body)
	return m.Sum(nil)
}

// Seal appends the authenticating line to body, which ends in a newline.
func (k Sealer) Seal(body []byte) []byte {
	out := append(bytes.Clone(body), MACPrefix...)
	out = hex.AppendEncode(out, k.mac(body))
	return append(out, '\n')
}

// Open checks data's authenticating line and returns the rest; ok is
// false when the line is missing or does not authenticate the rest under
// k.
func (k Sealer) Open(data []byte) (body []byte, ok bool) {
	i := bytes.LastIndex(data, []byte("\n"+MACPrefix))
	if i < 0 || !bytes.HasSuffix(data, []byte("\n")) {
		return nil, false
	}
	body, line := data[:i+1], data[i+1+len(MACPrefix):len(data)-1]
	sum, err := hex.DecodeString(string(line))
	if err != nil || !hmac.Equal(sum, k.mac(body)) {
		return nil, false
	}
	return body, true
}
