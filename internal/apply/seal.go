package apply

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
)

// The host's own state files (state.toml, ledger.tsv) end in a line that
// authenticates the rest of the file under a key derived from the host's
// signing key:
//
//	# mac: hmac-sha256 5e1a...
//
// so that anything with write access to the state directory but not the
// host key (which sits beside it, mode 0600, and which apply refuses to use
// when others can read it) cannot move the host back to an older generation
// by editing "generation = 3" to 2, or make it forget what it owns. A file
// whose line is missing or does not match fails closed: the run stops
// before it changes anything, naming the file and the way out.
const (
	macPrefix = "# mac: hmac-sha256 "
	macLabel  = "muster host state v1"
)

// stateKey is the key that authenticates the host's state files.
type stateKey []byte

func newStateKey(sign ed25519.PrivateKey) (stateKey, error) {
	return hkdf.Key(sha256.New, sign.Seed(), nil, macLabel, 32)
}

func (k stateKey) mac(body []byte) []byte {
	m := hmac.New(sha256.New, k)
	m.Write(body)
	return m.Sum(nil)
}

// seal appends the authenticating line to body, which ends in a newline.
func (k stateKey) seal(body []byte) []byte {
	out := append(bytes.Clone(body), macPrefix...)
	out = hex.AppendEncode(out, k.mac(body))
	return append(out, '\n')
}

var errUnsealed = errors.New("it is corrupt, or was changed by something other than muster apply, or belongs to another host: its last line does not authenticate it under this host's key")

// open checks data's authenticating line and returns the rest.
func (k stateKey) open(data []byte) ([]byte, error) {
	i := bytes.LastIndex(data, []byte("\n"+macPrefix))
	if i < 0 || !bytes.HasSuffix(data, []byte("\n")) {
		return nil, errUnsealed
	}
	body, line := data[:i+1], data[i+1+len(macPrefix):len(data)-1]
	sum, err := hex.DecodeString(string(line))
	if err != nil || !hmac.Equal(sum, k.mac(body)) {
		return nil, errUnsealed
	}
	return body, nil
}
