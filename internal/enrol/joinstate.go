package enrol

import (
	"context"
	"errors"
	"fmt"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/spool"
)

// JoinState is what the spool says of a host's own join request, seen
// from the host, for an apply that finds nothing declared for it: a host
// the mesh refused must not read as one that simply has nothing to do.
type JoinState struct {
	// TokenID is the token the host joined with.
	TokenID string
	// Pending: the request is in the spool and no admit has decided its
	// token yet.
	Pending bool
	// Refused: the mesh refused the request. Reason is the mesh's reason
	// when the host can read it (refusals recorded before they were
	// sealed to the host, too, are readable by the mesh only).
	Refused bool
	Reason  string
}

// ReadJoinState looks up the join request the host made with token tid
// (host.ReadJoin) and the mesh's answer. It returns nil when there is
// nothing to say: the host does not know its token (it joined with an
// older muster), or the token was decided and this request not refused, as
// for an admitted host.
func ReadJoinState(ctx context.Context, sp spool.Spool, id *host.Identity, tid string) (*JoinState, error) {
	fp := id.NodeID()
	if tid == "" {
		return nil, nil
	}
	st := &JoinState{TokenID: tid}
	data, err := sp.Get(ctx, spool.RefusedName(tid, fp), 1<<20)
	switch {
	case err == nil:
		st.Refused = true
		st.Reason = readRefusal(data, tid, fp, id)
		return st, nil
	case !errors.Is(err, spool.ErrNotFound):
		return nil, err
	}
	if _, err := sp.Stat(ctx, spool.AdmitName(tid)); err == nil {
		return nil, nil
	} else if !errors.Is(err, spool.ErrNotFound) {
		return nil, err
	}
	if _, err := sp.Stat(ctx, spool.JoinName(tid, fp)); err == nil {
		st.Pending = true
		return st, nil
	} else if !errors.Is(err, spool.ErrNotFound) {
		return nil, err
	}
	return nil, nil
}

// readRefusal returns the reason of a refusal sealed to the host too, or
// "" when the host cannot read it or it is not the mesh's.
func readRefusal(data []byte, tid, fp string, id *host.Identity) string {
	signer, err := id.Mesh.Verifier()
	if err != nil {
		return ""
	}
	var rf Refusal
	if err := bundle.OpenTOML(data, refusedCtx(tid, fp), id.Pair.Age, signer, &rf); err != nil {
		return ""
	}
	return rf.Reason
}

// String says the state in one line for the host's operator.
func (st *JoinState) String() string {
	switch {
	case st.Refused && st.Reason != "":
		return fmt.Sprintf("the mesh refused this host's join request (token %s): %s", st.TokenID, st.Reason)
	case st.Refused:
		return fmt.Sprintf("the mesh refused this host's join request (token %s); muster enrol admit on the mesh says why", st.TokenID)
	case st.Pending:
		return fmt.Sprintf("this host's join request (token %s) waits for the mesh to admit it: on its next admit or declare", st.TokenID)
	}
	return ""
}
