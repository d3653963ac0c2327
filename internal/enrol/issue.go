package enrol

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/token"
	"github.com/muster-tool/muster/spool"
)

// DefaultExpiry is how long a token is valid unless --expires says
// otherwise.
const DefaultExpiry = 7 * 24 * time.Hour

// IssueOptions are the choices fixed when a token is issued.
type IssueOptions struct {
	Name    string
	Reenrol bool
	Expires time.Duration
	// Labels of the node; none given for a re-enrolment keeps the labels
	// it has when the token is admitted (see decide), changes made with
	// enrol label in between included.
	Labels map[string]string
	Now    time.Time
	// Warn is told what went wrong without undoing the token: the
	// journal not written. Nil drops it.
	Warn func(string)
}

// Issue records a new token's verifier in the spool, and in the mesh
// directory's journal of the tokens it issued, and returns the token. The
// token itself is never stored: the caller prints it once. Once the
// spool holds the record the token is issued: a journal that cannot be
// written is a warning (admit reads the token from the spool instead),
// not an error that would lose the only copy of a valid token.
func Issue(ctx context.Context, m *mesh.Mesh, reg *Registry, o IssueOptions) (*token.Token, error) {
	if err := token.CheckName(o.Name); err != nil {
		return nil, fault.New(fault.Usage, err)
	}
	if err := checkLabels(o.Labels); err != nil {
		return nil, fault.New(fault.Usage, err)
	}
	if o.Expires <= 0 {
		return nil, fault.Usagef("--expires must be positive")
	}
	current := reg.Enrolled(o.Name)
	switch {
	case current != nil && !o.Reenrol:
		return nil, fault.WithHint(
			fault.Refusedf("node %s is already enrolled (identity %s since %s); a plain token can never take over an enrolled name", o.Name, current.NodeID, current.AdmittedAt.Format(time.RFC3339)),
			"to replace its identity (a rebuilt host), issue a re-enrolment token: muster enrol issue "+o.Name+" --reenrol")
	case current == nil && o.Reenrol:
		return nil, fault.WithHint(fmt.Errorf("node %s is not enrolled, so there is nothing to re-enrol", o.Name),
			"issue a plain token: muster enrol issue "+o.Name)
	}
	tok, err := token.New(o.Name, m.Public().Fingerprint(), o.Now.Add(o.Expires))
	if err != nil {
		return nil, fault.New(fault.Usage, fmt.Errorf("--expires %s: %w", o.Expires, err))
	}
	is := Issued{
		Version:  recordVersion,
		TokenID:  tok.ID(),
		Name:     o.Name,
		Verifier: encodeKey(tok.Verifier()),
		Reenrol:  o.Reenrol,
		Expires:  tok.Expires,
		Labels:   o.Labels,
		IssuedAt: o.Now.UTC(),
	}
	rcpt, err := m.Public().Recipient()
	if err != nil {
		return nil, err
	}
	data, err := bundle.SealTOML(is, tokenCtx(tok.ID()), m.Pair.Sign, rcpt)
	if err != nil {
		return nil, err
	}
	if err := m.Spool.Put(ctx, spool.TokenName(tok.ID()), data); err != nil {
		return nil, err
	}
	// After the spool's record, which is the durable one: a token the
	// journal names is one the spool was given.
	if err := m.Journal(mesh.TokensJournal).Append(is); err != nil && o.Warn != nil {
		o.Warn(fmt.Sprintf("token %s is issued, but the mesh directory's journal of tokens could not be written: %v; enrol admit reads this token from spool %s instead", tok.ID(), err, m.Spool))
	}
	return tok, nil
}

// checkLabels checks every label, in key order so that the first bad one
// named is always the same.
func checkLabels(labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if err := checkLabel(k, labels[k]); err != nil {
			return err
		}
	}
	return nil
}

func checkLabel(k, v string) error {
	ok := func(s string) bool {
		if s == "" || len(s) > 63 {
			return false
		}
		for _, c := range s {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
				return false
			}
		}
		return true
	}
	if !ok(k) || !ok(v) {
		return fmt.Errorf("invalid label %q=%q: keys and values are 1 to 63 letters, digits, '-', '_' or '.'", k, v)
	}
	return nil
}
