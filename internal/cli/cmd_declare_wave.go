package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/declare"
	"github.com/muster-tool/muster/internal/fault"
)

// waveOptions are the flags of declare that stage a rollout: the
// generation is declared for the nodes they select only, and the others
// the declaration selects are held on the generation they have.
type waveOptions struct {
	Waves []string
	Only  []string
}

func (o *waveOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.Waves, "wave", nil, "declare the generation only for the nodes of wave `NAME` ([rollout.wave.NAME]); the others keep theirs (may be given more than once)")
	fs.StringArrayVar(&o.Only, "only", nil, "declare the generation only for the nodes whose name matches `PATTERN`; the others keep theirs (may be given more than once)")
}

// wave is the part of the fleet the flags select in decl, nil for all of
// it. A wave decl does not have, or a malformed pattern, is a usage
// error.
func (o *waveOptions) wave(decl *declaration.Declaration) (*declaration.Wave, error) {
	w, err := decl.Wave(o.Waves, o.Only)
	if err != nil {
		return nil, fault.Usagef("%v", err)
	}
	return w, nil
}

// heldLine says which generations the held nodes keep, counted: a canary
// of one node in a fleet of thousands holds thousands.
func heldLine(held []declare.Held) string {
	count := map[uint64]int{}
	for _, h := range held {
		count[h.Generation]++
	}
	gens := make([]uint64, 0, len(count))
	for g := range count {
		gens = append(gens, g)
	}
	slices.Sort(gens)
	var parts []string
	for _, g := range gens {
		if g == 0 {
			parts = append(parts, fmt.Sprintf("%s with no generation yet", plural(count[g], "node")))
		} else {
			parts = append(parts, fmt.Sprintf("%s on generation %d", plural(count[g], "node"), g))
		}
	}
	return "held: " + strings.Join(parts, ", ") + " (each keeps it until a declare gives it a bundle)"
}
