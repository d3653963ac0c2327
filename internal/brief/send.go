package brief

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/spool"
)

// Ctx is the bundle context of a briefing.
func Ctx(nodeID string, seq uint64) bundle.Context {
	return bundle.Context{Kind: "briefing", Node: nodeID, Name: spool.BriefName(nodeID, seq)}
}

// Send writes briefing b to the spool as briefing seq (the host's clock in
// nanoseconds: the newest is the one with the highest), signed by the host
// identity id and sealed to the mesh.
func Send(ctx context.Context, sp spool.Spool, id *host.Identity, b *Briefing, seq uint64) error {
	rcpt, err := id.Mesh.Recipient()
	if err != nil {
		return err
	}
	nodeID := id.NodeID()
	data, err := bundle.SealTOML(b, Ctx(nodeID, seq), id.Pair.Sign, rcpt)
	if err != nil {
		return err
	}
	if err := spool.PutNew(ctx, sp, spool.BriefName(nodeID, seq), data); err != nil {
		return fmt.Errorf("send briefing: %w", err)
	}
	return nil
}

// Gist is what a briefing says that decides the mesh's view of the node:
// its outcome, which lines failed, and its facts (templates read them);
// not the free space or the clock, which change every time. Two briefings
// with the same gist need not both be sent.
func (b *Briefing) Gist() string {
	var w strings.Builder
	fmt.Fprintf(&w, "%s\n", b.Outcome())
	var failed []string
	for _, l := range outcome.FailedLines(b.Lines) {
		failed = append(failed, l.ID)
	}
	slices.Sort(failed)
	fmt.Fprintf(&w, "%s\n", strings.Join(failed, ","))
	if f := b.Facts; f != nil {
		m := f.Map()
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&w, "%s=%v\n", k, m[k])
		}
	}
	sum := sha256.Sum256([]byte(w.String()))
	return "sha256:" + hex.EncodeToString(sum[:])
}
