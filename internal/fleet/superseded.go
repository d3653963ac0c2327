package fleet

import (
	"slices"
	"strings"

	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/spool"
)

// SupersededReports returns the reports of the trusted identities that
// nothing this state answers depends on, so that spool gc can remove them:
// a host sends a report on every run that finds something new and once per
// contact interval besides, so most of a fleet's reports are older runs of
// the generation each host is on.
//
// Of each identity's reports of one generation, the newest that verified
// and is of the spool's commit is the one counted: the node's status on
// that generation, its last applied generation and its recovery copy
// come from it or from newer reports. An older report of that generation
// is superseded by it when it too verified and is of the spool's commit,
// ended no later than the counted one (last contact is the newest end),
// is not the first that passed (a rollout's apply time) and does not hold
// the recovery copy. Reports that did not verify, are misfiled or are of
// another history stay, for report to show; so do those of revoked
// identities, which spool gc removes by a rule of their own.
func (s *State) SupersededReports() []enrol.Superseded {
	b := s.Newest()
	var out []enrol.Superseded
	for nodeID, nf := range s.cache.Nodes {
		if id := s.reg.Identities[nodeID]; id == nil || id.Revoked() {
			continue
		}
		fs := nf.Reports
		for end := len(fs); end > 0; {
			gen, start := fs[end-1].Gen, end-1
			for start > 0 && fs[start-1].Gen == gen {
				start--
			}
			group := fs[start:end]
			end = start
			counted := newestCounted(fs, gen, b, s.cache.Commits)
			if counted == nil || len(group) < 2 {
				continue
			}
			first := firstPassed(fs, gen, b, s.cache.Commits)
			by := spool.ReportName(nodeID, counted.Gen, counted.Seq)
			for i := range group {
				f := &group[i]
				switch {
				case f == counted || f == first || f.Seq > counted.Seq:
				case !usable(f, b) || forked(f, s.cache.Commits) || f.ended() > counted.ended():
				case nf.Ledger != nil && nf.Ledger.Gen == f.Gen && nf.Ledger.Seq == f.Seq:
				default:
					out = append(out, enrol.Superseded{Object: spool.ReportName(nodeID, f.Gen, f.Seq), By: by})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b enrol.Superseded) int { return strings.Compare(a.Object, b.Object) })
	return out
}

// ReportNames returns the names of the reports filed under identity nodeID
// that the load found in the spool, oldest first: what spool gc removes of
// a revoked identity, known without listing its directory again.
func (s *State) ReportNames(nodeID string) []string {
	nf := s.cache.Nodes[nodeID]
	if nf == nil {
		return nil
	}
	out := make([]string, len(nf.Reports))
	for i, f := range nf.Reports {
		out[i] = spool.ReportName(nodeID, f.Gen, f.Seq)
	}
	return out
}
