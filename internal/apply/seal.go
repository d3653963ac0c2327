package apply

import (
	"crypto/ed25519"
	"errors"

	"github.com/muster-tool/muster/internal/keys"
)

// The host's own state files (state.toml, ledger.tsv) end in a line that
// authenticates the rest of the file under a key derived from the host's
// signing key (keys.Sealer):
//
//	# mac: hmac-sha256 5e1a...
//
// so that anything with write access to the state directory but not the
// host key (which sits beside it, mode 0600, and which apply refuses to use
// when others can read it) cannot move the host back to an older generation
// by editing "generation = 3" to 2, or make it forget what it owns. A file
// whose line is missing or does not match fails closed: the run stops
// before it changes anything, naming the file and the way out.
const macLabel = "muster host state v1"

// stateKey is the key that authenticates the host's state files.
type stateKey struct{ s keys.Sealer }

func newStateKey(sign ed25519.PrivateKey) (stateKey, error) {
	s, err := keys.NewSealer(sign.Seed(), macLabel)
	return stateKey{s}, err
}

// seal appends the authenticating line to body, which ends in a newline.
func (k stateKey) seal(body []byte) []byte { return k.s.Seal(body) }

var errUnsealed = errors.New("it is corrupt, or was changed by something other than muster apply, or belongs to another host: its last line does not authenticate it under this host's key")

// open checks data's authenticating line and returns the rest.
func (k stateKey) open(data []byte) ([]byte, error) {
	body, ok := k.s.Open(data)
	if !ok {
		return nil, errUnsealed
	}
	return body, nil
}
