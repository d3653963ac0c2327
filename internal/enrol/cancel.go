package enrol

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/spool"
)

// CancelOptions say which tokens to cancel: every token issued for Name,
// or only TokenID when it is set.
type CancelOptions struct {
	Name    string
	TokenID string
	Reason  string
	Now     time.Time
}

// CancelResult says what Cancel found for each token it looked at.
type CancelResult struct {
	// Cancelled are the tokens cancelled now.
	Cancelled []*Issued
	// Spent are the tokens that were already used, cancelled or expired,
	// each with what spent it.
	Spent []SpentToken
}

// SpentToken is a token Cancel left as it was, and why.
type SpentToken struct {
	Token  *Issued
	Reason string
	// Admitted is the admission the token made, if that is what spent
	// it and the identity it admitted has not been revoked since.
	Admitted *Admission
}

// Cancel makes tokens that no host has used yet unusable before they
// expire, for a token carried on a lost stick or sent to the wrong place.
// Each cancellation is written where the token's admission would be, with
// the same create-if-absent write that makes a token single-use, so a
// cancelled token can never be admitted, even by an admit running at the
// same moment: whichever record is written first stands, and Cancel says
// which. Join requests already waiting for the token are refused by the
// next admit; Cancel does not admit anything itself.
func Cancel(ctx context.Context, m *mesh.Mesh, o CancelOptions) (*CancelResult, error) {
	reg, err := LoadRegistry(ctx, m)
	if err != nil {
		return nil, err
	}
	tokens, err := issuedFor(ctx, m, reg, o)
	if err != nil {
		return nil, err
	}
	res := &CancelResult{}
	for _, is := range tokens {
		a := reg.Admitted[is.TokenID]
		if a == nil && !o.Now.Before(is.Expires) {
			res.Spent = append(res.Spent, SpentToken{Token: is, Reason: "expired at " + is.Expires.Format(time.RFC3339)})
			continue
		}
		if a == nil {
			c := &Admission{Version: recordVersion, TokenID: is.TokenID, Name: is.Name, CancelledAt: o.Now.UTC(), CancelReason: o.Reason}
			data, err := bundle.SealTOML(c, admitCtx(is.TokenID), m.Pair.Sign, m.Pair.Age.Recipient())
			if err != nil {
				return nil, err
			}
			err = m.Spool.Put(ctx, spool.AdmitName(is.TokenID), data)
			if err == nil {
				res.Cancelled = append(res.Cancelled, is)
				continue
			}
			if !errors.Is(err, spool.ErrConflict) {
				return nil, err
			}
			// An admit, or another cancel, decided the token first.
			if a, err = readAdmission(ctx, m, is.TokenID); err != nil {
				return nil, err
			}
		}
		st := SpentToken{Token: is, Reason: tokenUsed(a)}
		switch id := reg.Identities[a.NodeID]; {
		case a.Cancelled():
		case id != nil && id.Revoked():
			// What the token let in is refused already.
			st.Reason += "; that identity was revoked at " + id.RevokedAt.Format(time.RFC3339)
		default:
			st.Admitted = a
		}
		res.Spent = append(res.Spent, st)
	}
	return res, nil
}

// issuedFor reads the token records Cancel is asked about, oldest first.
func issuedFor(ctx context.Context, m *mesh.Mesh, reg *Registry, o CancelOptions) ([]*Issued, error) {
	if o.TokenID != "" {
		tid, err := fullTokenID(ctx, m, o.TokenID)
		if err != nil {
			return nil, err
		}
		var mu sync.Mutex
		is, err := reg.issued(ctx, m, &mu, tid)
		if err != nil {
			return nil, err
		}
		if is == nil {
			return nil, fault.WithHint(fmt.Errorf("no token %s was issued by this mesh", o.TokenID),
				"the token id is printed when the token is issued; cancel every token of a node with: muster enrol cancel "+o.Name)
		}
		if is.Name != o.Name {
			return nil, fault.Usagef("token %s was issued for %s, not %s", tid, is.Name, o.Name)
		}
		return []*Issued{is}, nil
	}
	out, err := readIssued(ctx, m, reg, func(string) bool { return true }, func(is *Issued) bool { return is.Name == o.Name })
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fault.WithHint(fmt.Errorf("no token was ever issued for %s", o.Name),
			"see the nodes and the tokens not used yet with: muster enrol list")
	}
	return out, nil
}

// fullTokenID returns the one token id that starts with prefix (the tables
// for people show the first 12 characters), or prefix itself when no id
// does, for the caller to say no such token was issued.
func fullTokenID(ctx context.Context, m *mesh.Mesh, prefix string) (string, error) {
	if prefix == "" || strings.Trim(prefix, "0123456789abcdef") != "" {
		return "", fault.Usagef("token id %q: want the hex id that enrol issue and enrol list print", prefix)
	}
	var ids []string
	err := m.Spool.List(ctx, spool.EnrolTokenPrefix+prefix, func(i spool.Info) error {
		ids = append(ids, strings.TrimPrefix(i.Name, spool.EnrolTokenPrefix))
		return nil
	})
	switch {
	case err != nil:
		return "", err
	case len(ids) > 1:
		return "", fault.Usagef("token id %s is the start of %d token ids: give more of it", prefix, len(ids))
	case len(ids) == 1:
		return ids[0], nil
	}
	return prefix, nil
}

// UnusedTokens returns the tokens no host has used and no one cancelled,
// that have not expired at now, by node name and then oldest first: the
// tokens that could still admit a host.
func UnusedTokens(ctx context.Context, m *mesh.Mesh, reg *Registry, now time.Time) ([]*Issued, error) {
	return readIssued(ctx, m, reg, func(tid string) bool { return reg.Admitted[tid] == nil },
		func(is *Issued) bool { return now.Before(is.Expires) })
}

// readIssued reads the token records in the spool whose ids want selects
// (the others are not even decrypted) and returns those keep selects, by
// node name and then oldest first. A token the mesh directory's journal
// names is taken from there, as admit takes it, and its record is not
// opened. Records that do not verify are junk, skipped into reg.Skipped.
func readIssued(ctx context.Context, m *mesh.Mesh, reg *Registry, want func(tokenID string) bool, keep func(*Issued) bool) ([]*Issued, error) {
	signer := m.Pair.Sign.Public().(ed25519.PublicKey)
	var (
		mu  sync.Mutex
		out []*Issued
		err error
	)
	listErr := eachObject(ctx, m.Spool, spool.EnrolTokenPrefix, func(i spool.Info) bool {
		tid := strings.TrimPrefix(i.Name, spool.EnrolTokenPrefix)
		if !want(tid) || err != nil {
			return false
		}
		is, ok, jerr := reg.knownIssued(m, &mu, tid)
		if jerr != nil {
			err = jerr
			return false
		}
		if !ok || is == nil {
			return true // to be opened, or junk to be named again
		}
		if keep(is) {
			mu.Lock()
			out = append(out, is)
			mu.Unlock()
		}
		return false
	}, func(name string, data []byte) error {
		tid := strings.TrimPrefix(name, spool.EnrolTokenPrefix)
		is := new(Issued)
		if err := bundle.OpenTOML(data, tokenCtx(tid), m.Pair.Age, signer, is); err != nil {
			return err
		}
		if is.TokenID != tid {
			return fmt.Errorf("token record names token %s", is.TokenID)
		}
		if keep(is) {
			mu.Lock()
			out = append(out, is)
			mu.Unlock()
		}
		return nil
	}, func(name string, err error) { reg.skip(&mu, name, err) })
	if err := cmp.Or(listErr, err); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if !a.IssuedAt.Equal(b.IssuedAt) {
			return a.IssuedAt.Before(b.IssuedAt)
		}
		return a.TokenID < b.TokenID
	})
	return out, nil
}
