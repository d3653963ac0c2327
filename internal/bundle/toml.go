package bundle

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/muster-tool/muster/internal/tomlfile"
)

// ErrPayload: a bundle that verified carries a payload that does not decode
// into the value asked for, such as a key written by a newer muster. It is
// a failure, not a refusal: the signer is trusted, the content is not
// understood.
var ErrPayload = errors.New("payload does not decode")

func marshalTOML(v any, c Context) ([]byte, error) {
	p, err := toml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding payload as TOML: %w", subject(c), err)
	}
	return p, nil
}

// DecodeTOMLStrict decodes the TOML payload p of a bundle made for c into
// v as OpenTOML does, for a caller that opened the bundle itself: a key v
// has no place for is an error naming it.
func DecodeTOMLStrict(p []byte, c Context, v any) error {
	return unmarshalTOML(p, c, v)
}

// unmarshalTOML decodes p into v and refuses keys v has no field for, so a
// misspelt or newer key is never silently dropped. A payload over the caps
// on TOML is refused before the TOML library sees it: a signature says who
// wrote a payload, not that it is safe to parse.
func unmarshalTOML(p []byte, c Context, v any) error {
	md, err := tomlfile.DecodeMeta(context.Background(), p, v)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", subject(c), ErrPayload, err)
	}
	if extra := md.Undecoded(); len(extra) > 0 {
		keys := make([]string, len(extra))
		for i, k := range extra {
			keys[i] = strconv.Quote(k.String())
		}
		noun := "key"
		if len(keys) > 1 {
			noun = "keys"
		}
		return fmt.Errorf("%s: %w: unknown %s %s", subject(c), ErrPayload, noun, strings.Join(keys, ", "))
	}
	return nil
}
