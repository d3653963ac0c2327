package report

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/tomlfile"
)

// How a report fits. A report is a bundle payload, so it can be no bigger
// than MaxSize. declare refuses a node whose resources could need more
// than NodeBudget of a report (ResourceCost says how much each can): all
// of what is left after reserve, which holds the report's header, notes
// and the apply's own lines. The one part of a line that no declaration
// bounds, its detail, the host cuts when the report would not fit
// otherwise (Fit), but never below DetailFloor bytes. So whatever declare
// accepts, the host can report whole, in a run without orphans.
//
// Orphans, resources of a generation before whose lines (and, while they
// cannot be removed, ledger entries) the report carries too, are not
// budgeted: a run that removes many of them as well may not fit, and Fit
// then sends the failed lines and the recovery copy with a failed line
// saying why, so that the node is failed for that run, never silently
// outstanding, and the run after it, with the orphans gone, reports whole.
// Only a recovery copy over MaxSize on its own, the entries of the
// declared resources and of orphans that could not be removed together,
// sends no report. Giving half of the report to the orphans of the
// generation before, as this did once, kept that run whole too, but made
// a node of more than about 65,000 files impossible to declare.
const (
	// MaxSize is the cap on a report's TOML.
	MaxSize = bundle.MaxPayload
	reserve = 1 << 20
	// NodeBudget is how much of a report a node's declared resources may
	// take, with their details cut to DetailFloor.
	NodeBudget = MaxSize - reserve
	// DetailFloor is the least a detail is cut to, in bytes of its TOML
	// spelling.
	DetailFloor = 120
)

// Spellings of a line and a ledger entry in Marshal's output.
const (
	lineStart    = "\n[[line]]\n  id = "
	statusKey    = "\n  status = "
	detailKey    = "  detail = "
	digestKey    = "  digest = "
	ledgerStart  = "\n[[ledger]]\n  id = "
	typeKey      = "\n  type = "
	pathKey      = "  path = "
	nameKey      = "  name = "
	createdLine  = "  created = true\n"
	longestState = `"changed"`
	// digestSize is the spelling of a digest: "sha256:" and 64 hex
	// digits, quoted.
	digestSize = 2 + len("sha256:") + 64
)

// ResourceCost is the most one declared resource can add to a report: its
// line, with its detail cut to DetailFloor and a digest, and its ledger
// entry.
func ResourceCost(id, kind, path, name string) int {
	idSize := spelled(id)
	n := len(lineStart) + idSize + len(statusKey) + len(longestState) + 1 +
		len(detailKey) + DetailFloor + 1 + len(digestKey) + digestSize + 1
	n += len(ledgerStart) + idSize + len(typeKey) + spelled(kind) + 1 +
		len(digestKey) + digestSize + 1 + len(createdLine)
	if path != "" {
		n += len(pathKey) + spelled(path) + 1
	}
	if name != "" {
		n += len(nameKey) + spelled(name) + 1
	}
	return n
}

// spelled is the size of s spelled as a TOML string.
func spelled(s string) int { return len(tomlfile.AppendString(nil, s)) }

// OverflowLineID is the failed line of a report that did not fit whole.
const OverflowLineID = "muster:report"

// Fit returns the payload of r, made to fit MaxSize, and the report it
// encodes. A report that fits is r as it is. One that does not has its
// longest details cut, none below DetailFloor, with a note saying so. If
// that is still too big (orphans of many generations the host could not
// remove, or a mesh that declared more than NodeBudget), the report keeps
// its recovery copy and failed lines and loses its other lines, which a
// failed line, OverflowLineID, counts and explains: the node is failed,
// never silently outstanding. If even that does not fit, Fit returns an
// error naming the cap, and the report is not sent.
func Fit(r *Report) ([]byte, *Report, error) {
	p := Marshal(r)
	if len(p) <= MaxSize {
		return p, r, nil
	}
	whole := len(p)
	if cut, ok := cutDetails(r, len(p)); ok {
		return Marshal(cut), cut, nil
	}
	short := *r
	short.Lines = nil
	for _, l := range r.Lines {
		if l.Status == outcome.Failed || !l.Status.Valid() {
			short.Lines = append(short.Lines, cutLine(l, DetailFloor))
		}
	}
	overflow := outcome.Line{ID: OverflowLineID, Status: outcome.Failed, Detail: fmt.Sprintf(
		"the report of %d lines was %d bytes, over the %d MiB cap on a report; only its %d failed lines and the recovery copy were sent",
		len(r.Lines), whole, MaxSize>>20, len(short.Lines))}
	short.Lines = append(short.Lines, overflow)
	if p := Marshal(&short); len(p) <= MaxSize {
		return p, &short, nil
	}
	overflow.Detail = fmt.Sprintf("the report of %d lines was %d bytes, over the %d MiB cap on a report; only the recovery copy was sent", len(r.Lines), whole, MaxSize>>20)
	short.Lines = []outcome.Line{overflow}
	if p := Marshal(&short); len(p) <= MaxSize {
		return p, &short, nil
	}
	err := fmt.Errorf("node %s: the report of generation %d is %d bytes, and its recovery copy of %d entries alone is over the %d MiB cap on a report; no report was sent",
		r.Node, r.Generation, whole, len(r.Ledger), MaxSize>>20)
	return nil, nil, fault.WithHint(err, "declare fewer resources for this node; until then the mesh sees it as outstanding")
}

// cutDetails returns a copy of r whose longest details are cut so that it
// fits, if cutting none below DetailFloor is enough; size is r's size.
func cutDetails(r *Report, size int) (*Report, bool) {
	spell := make([]int, len(r.Lines)) // each detail's spelling, 0 if none
	var sizes []int
	for i, l := range r.Lines {
		if l.Detail != "" {
			spell[i] = spelled(l.Detail)
			sizes = append(sizes, spell[i])
		}
	}
	// The largest limit for all details that fits: each detail over it
	// shrinks to it. Sizes shrink by less than the limit says where a cut
	// falls inside an escape or a rune, so the result is measured and the
	// limit lowered until it fits.
	slices.Sort(sizes)
	over := size - MaxSize + 256 // and room for the note
	limit := -1
	saved := 0
	for k := len(sizes) - 1; k >= 0; k-- {
		below := DetailFloor
		if k > 0 {
			below = max(sizes[k-1], DetailFloor)
		}
		n := len(sizes) - k // details above the next one down
		if saved+n*(sizes[k]-below) >= over {
			limit = sizes[k] - (over-saved+n-1)/n
			break
		}
		saved += n * (sizes[k] - below)
		if below == DetailFloor {
			break
		}
	}
	if limit < DetailFloor {
		return nil, false
	}
	for {
		cut := *r
		cut.Lines = slices.Clone(r.Lines)
		n := 0
		for i := range cut.Lines {
			if spell[i] > limit {
				cut.Lines[i] = cutLine(cut.Lines[i], limit)
				n++
			}
		}
		cut.Notes = append(slices.Clip(r.Notes), fmt.Sprintf("%d details were cut to at most %d bytes to keep the report within the %d MiB cap", n, limit, MaxSize>>20))
		if len(Marshal(&cut)) <= MaxSize {
			return &cut, true
		}
		if limit == DetailFloor {
			return nil, false
		}
		limit = max(DetailFloor, limit-limit/8-1)
	}
}

// cutLine returns l with its detail cut, if need be, to spell in at most
// limit bytes, ending in "…".
func cutLine(l outcome.Line, limit int) outcome.Line {
	if spelled(l.Detail) <= limit {
		return l
	}
	const ellipsis = "…"
	room := limit - 2 - len(ellipsis) // quotes, then the ellipsis
	n, i := 0, 0
	for i < len(l.Detail) {
		_, size := utf8.DecodeRuneInString(l.Detail[i:])
		w := spelled(l.Detail[i:i+size]) - 2
		if n+w > room {
			break
		}
		n += w
		i += size
	}
	l.Detail = l.Detail[:i] + ellipsis
	return l
}
