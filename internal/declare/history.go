package declare

import (
	"context"
	"fmt"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/mesh"
)

// currentHistory reads the spool's history as far as declare needs it: the
// newest commit that verifies, which the next one will follow. Commits
// that do not verify are skipped with a warning. The spool's history must
// reach the newest commit this mesh directory made (mesh.Head): a spool
// restored from an older copy, or a copy that grew apart from the one this
// mesh declared on, is refused, because a commit on it would give a
// generation a second history.
func currentHistory(ctx context.Context, m *mesh.Mesh) (*generation.History, *generation.Commit, []string, error) {
	// The head is read before the spool is listed: another declare of this
	// mesh that commits in between moves the head on after its commit is
	// in the spool, so a head read after the listing could be newer than
	// anything listed, and a race would look like a restored spool.
	head, err := m.Head()
	if err != nil {
		return nil, nil, nil, err
	}
	hist, err := generation.LoadHistory(ctx, m.Spool, m.Verifier())
	if err != nil {
		return nil, nil, nil, err
	}
	newest, err := hist.Newest(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	var warnings []string
	for _, s := range hist.Skipped {
		warnings = append(warnings, fmt.Sprintf("%s (it is not this mesh's; spool verify lists it)", s))
	}
	if head == nil {
		return hist, newest, warnings, nil
	}
	headPath := mesh.HeadPath(m.Dir)
	lost := fmt.Sprintf("if that copy is lost for good, move %s away to declare on this spool's history: hosts that applied the lost generations will refuse it until their state is reset", headPath)
	if newest == nil || newest.Generation < head.Generation {
		var have string
		if newest == nil {
			have = "it has no commit"
		} else {
			have = fmt.Sprintf("its newest commit is generation %d", newest.Generation)
		}
		return nil, nil, nil, fault.WithHint(
			fault.Refusedf("spool %s is older than this mesh's history: %s, but this mesh committed generation %d (%s)",
				m.Spool, have, head.Generation, generation.ShortDigest(head.Commit)),
			fmt.Sprintf("the spool was restored from an older copy, or is a copy that missed the newest commits: sync the newer copy back into it (muster spool sync NEWER %s) and declare again; %s", m.Spool, lost))
	}
	tr, err := hist.Trace(ctx, newest, head.Generation, head.Commit)
	if err != nil {
		return nil, nil, nil, err
	}
	switch tr.Verdict {
	case generation.Diverges:
		var what string
		switch {
		case newest.Generation == head.Generation:
			what = fmt.Sprintf("its commit of generation %d is %s", head.Generation, generation.ShortDigest(newest.Digest))
		case tr.Named != "":
			what = fmt.Sprintf("its newest commit, generation %d, follows commit %s of generation %d", newest.Generation, generation.ShortDigest(tr.Named), head.Generation)
		default:
			what = fmt.Sprintf("its newest commit, generation %d, has a history that passes over generation %d", newest.Generation, head.Generation)
		}
		return nil, nil, nil, fault.WithHint(
			fault.Refusedf("spool %s holds another history of this mesh: %s, but this mesh committed generation %d as %s",
				m.Spool, what, head.Generation, generation.ShortDigest(head.Commit)),
			fmt.Sprintf("two copies of the spool grew apart (a restored backup declared on, or two operators on two copies): sync the copy holding this mesh's generation %d back and settle which history stands; %s", head.Generation, lost))
	case generation.Unknown:
		warnings = append(warnings, fmt.Sprintf("the history of spool %s leaves the spool at generation %d, before it reaches generation %d, which this mesh committed: it cannot be checked", m.Spool, tr.At, head.Generation))
	case generation.Holds:
		if newest.Generation > head.Generation {
			// Another copy of this mesh declared since: remember the
			// newer history as this one's.
			_ = m.RecordHead(mesh.Head{Generation: newest.Generation, Commit: newest.Digest, CommittedAt: newest.DeclaredAt})
		}
	}
	return hist, newest, warnings, nil
}
