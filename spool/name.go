package spool

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits on object names. A segment of at most 128 bytes fits every
// filesystem a spool is likely to be copied to, including encrypted home
// directories (eCryptfs allows 143) and FAT-formatted USB sticks; 1024 bytes
// is the longest key S3 accepts.
const (
	MaxNameLen    = 1024
	MaxSegmentLen = 128
)

// ValidName reports whether name is a valid object name, and if not, returns
// an error wrapping ErrBadName that says why. This is the one place the
// naming rule lives; doc.go explains it.
func ValidName(name string) error {
	if reason := nameProblem(name); reason != "" {
		return fmt.Errorf("%w %q: %s", ErrBadName, name, reason)
	}
	return nil
}

// ValidPrefix reports whether prefix can start a valid object name, so that
// List can refuse a prefix no object could ever match. The empty prefix
// matches every object. Every segment but the last must be a whole valid
// segment; the last may be empty (the prefix ends in "/") or the start of
// one.
func ValidPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) > MaxNameLen {
		return fmt.Errorf("%w prefix %q: longer than %d bytes", ErrBadName, prefix, MaxNameLen)
	}
	if prefix[0] == '/' {
		return fmt.Errorf("%w prefix %q: starts with /", ErrBadName, prefix)
	}
	segs := strings.Split(prefix, "/")
	last := segs[len(segs)-1]
	for _, seg := range segs[:len(segs)-1] {
		if reason := segmentProblem(seg); reason != "" {
			return fmt.Errorf("%w prefix %q: %s", ErrBadName, prefix, reason)
		}
	}
	if last != "" {
		if reason := segmentStartProblem(last); reason != "" {
			return fmt.Errorf("%w prefix %q: %s", ErrBadName, prefix, reason)
		}
	}
	return nil
}

func nameProblem(name string) string {
	switch {
	case name == "":
		return "empty"
	case len(name) > MaxNameLen:
		return fmt.Sprintf("longer than %d bytes", MaxNameLen)
	case name[0] == '/':
		return "starts with /"
	case name[len(name)-1] == '/':
		return "ends with /"
	}
	for seg := range strings.SplitSeq(name, "/") {
		if reason := segmentProblem(seg); reason != "" {
			return reason
		}
	}
	return ""
}

func segmentProblem(seg string) string {
	if seg == "" {
		return "empty segment (two slashes in a row)"
	}
	if reason := segmentStartProblem(seg); reason != "" {
		return reason
	}
	// FAT drops a trailing dot, so "x." and "x" would collide on a USB stick.
	if seg[len(seg)-1] == '.' {
		return fmt.Sprintf("segment %q ends with a dot", seg)
	}
	return ""
}

// segmentStartProblem checks what a whole segment and the partial last
// segment of a prefix have in common: the alphabet and the first byte.
func segmentStartProblem(seg string) string {
	if len(seg) > MaxSegmentLen {
		return fmt.Sprintf("segment %q is longer than %d bytes", seg, MaxSegmentLen)
	}
	for i := 0; i < len(seg); i++ {
		if !nameByte(seg[i]) {
			return fmt.Sprintf("%q is not allowed (use a-z 0-9 . _ -)", seg[i:i+1])
		}
	}
	// A leading dot hides temp files (and rsync's partial files) from
	// listings and rules out "." and ".."; a leading dash would read as an
	// option to shell tools.
	switch seg[0] {
	case '.':
		return fmt.Sprintf("segment %q starts with a dot", seg)
	case '-':
		return fmt.Sprintf("segment %q starts with a dash", seg)
	}
	return ""
}

func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// numberLen is the width of generations and sequence numbers in names: the
// digits of the largest uint64, so lexical order is numeric order.
const numberLen = 20

// GenerationName formats a generation for use in an object name: 20 decimal
// digits, zero-padded, so that listing names in lexical order lists
// generations in numeric order.
func GenerationName(n uint64) string { return formatNumber(n) }

// ParseGeneration parses a generation formatted by GenerationName. It
// accepts exactly 20 decimal digits, so each generation has one name.
func ParseGeneration(s string) (uint64, error) { return parseNumber("generation", s) }

// SeqName formats a sequence number the same way as a generation.
func SeqName(n uint64) string { return formatNumber(n) }

// ParseSeq parses a sequence number formatted by SeqName.
func ParseSeq(s string) (uint64, error) { return parseNumber("sequence number", s) }

func formatNumber(n uint64) string {
	s := strconv.FormatUint(n, 10)
	return strings.Repeat("0", numberLen-len(s)) + s
}

func parseNumber(what, s string) (uint64, error) {
	if len(s) != numberLen {
		return 0, fmt.Errorf("%s %q: want %d decimal digits", what, s, numberLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%s %q: want %d decimal digits", what, s, numberLen)
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: out of range", what, s)
	}
	return n, nil
}

// The spool's layout (see doc.go). Prefixes end in "/" so that listing one
// never matches a sibling that merely starts with the same letters.
const (
	MeshKeysName      = "mesh/keys"
	EnrolTokenPrefix  = "enrol/token/"
	EnrolJoinPrefix   = "enrol/join/"
	EnrolAdmitPrefix  = "enrol/admit/"
	EnrolRevokePrefix = "enrol/revoke/"
	EnrolLabelPrefix  = "enrol/label/"
	BriefPrefix       = "brief/"
	DeclPrefix        = "decl/"
	CommitPrefix      = "commit/"
	ReportPrefix      = "report/"
	RepoPrefix        = "repo/"
	RepoIndexPrefix   = RepoPrefix + "index/"
	EnrolPrefix       = "enrol/"
)

// TokenName names the verifier recorded when token tokenID is issued.
func TokenName(tokenID string) string { return EnrolTokenPrefix + tokenID }

// JoinName names a host's join request made with token tokenID.
func JoinName(tokenID, hostFP string) string { return EnrolJoinPrefix + tokenID + "/" + hostFP }

// AdmitName names the admission record of token tokenID. Only one can ever
// be written, which is what makes a token single-use.
func AdmitName(tokenID string) string { return EnrolAdmitPrefix + tokenID }

// RevokeName names the revocation of node nodeID.
func RevokeName(nodeID string) string { return EnrolRevokePrefix + nodeID }

// LabelName names change seq of the labels of node nodeID, written by
// enrol label.
func LabelName(nodeID string, seq uint64) string {
	return EnrolLabelPrefix + nodeID + "/" + SeqName(seq)
}

// ParseLabelName splits a label change's name into its node and sequence
// number.
func ParseLabelName(name string) (nodeID string, seq uint64, err error) {
	parts, ok := splitUnder(name, EnrolLabelPrefix, 2)
	if !ok {
		return "", 0, fmt.Errorf("object %s is not a label change (want %s<nodeid>/<seq>)", name, EnrolLabelPrefix)
	}
	if seq, err = ParseSeq(parts[1]); err != nil {
		return "", 0, fmt.Errorf("object %s: %w", name, err)
	}
	return parts[0], seq, nil
}

// BriefName names briefing seq of node nodeID.
func BriefName(nodeID string, seq uint64) string {
	return BriefPrefix + nodeID + "/" + SeqName(seq)
}

// DeclGenPrefix is the directory of generation gen's declaration bundles,
// every declare run's: decl/<gen>/.
func DeclGenPrefix(gen uint64) string { return DeclPrefix + GenerationName(gen) + "/" }

// DeclRunPrefix is the directory of the bundles declare run runID wrote
// for generation gen: decl/<gen>/<run>/.
func DeclRunPrefix(gen uint64, runID string) string { return DeclGenPrefix(gen) + runID + "/" }

// DeclName names node nodeID's declaration bundle for generation gen,
// written by declare run runID.
func DeclName(gen uint64, runID, nodeID string) string {
	return DeclRunPrefix(gen, runID) + nodeID
}

// SettingsName names the settings document of generation gen written by
// declare run runID: every resource the run declared, for the mesh alone
// (a node id is hex, so "mesh" is never one).
func SettingsName(gen uint64, runID string) string {
	return DeclRunPrefix(gen, runID) + "mesh"
}

// CommitName names the commit of generation gen.
func CommitName(gen uint64) string { return CommitPrefix + GenerationName(gen) }

// ReportName names report seq of node nodeID for generation gen.
func ReportName(nodeID string, gen, seq uint64) string {
	return ReportPrefix + nodeID + "/" + GenerationName(gen) + "-" + SeqName(seq)
}

// ParseCommitName returns the generation of a commit object's name.
func ParseCommitName(name string) (uint64, error) {
	rest, ok := strings.CutPrefix(name, CommitPrefix)
	if !ok {
		return 0, fmt.Errorf("object %s is not a commit", name)
	}
	gen, err := ParseGeneration(rest)
	if err != nil {
		return 0, fmt.Errorf("object %s: %w", name, err)
	}
	return gen, nil
}

// ParseBriefName splits a briefing's name into its node and sequence number.
func ParseBriefName(name string) (nodeID string, seq uint64, err error) {
	parts, ok := splitUnder(name, BriefPrefix, 2)
	if !ok {
		return "", 0, fmt.Errorf("object %s is not a briefing (want %s<nodeid>/<seq>)", name, BriefPrefix)
	}
	if seq, err = ParseSeq(parts[1]); err != nil {
		return "", 0, fmt.Errorf("object %s: %w", name, err)
	}
	return parts[0], seq, nil
}

// ParseDeclName splits a declaration's name into its generation, declare
// run and node.
func ParseDeclName(name string) (gen uint64, runID, nodeID string, err error) {
	parts, ok := splitUnder(name, DeclPrefix, 3)
	if !ok {
		return 0, "", "", fmt.Errorf("object %s is not a declaration (want %s<generation>/<runid>/<nodeid>)", name, DeclPrefix)
	}
	if gen, err = ParseGeneration(parts[0]); err != nil {
		return 0, "", "", fmt.Errorf("object %s: %w", name, err)
	}
	return gen, parts[1], parts[2], nil
}

// ParseReportName splits a report's name into its node, generation and
// sequence number.
func ParseReportName(name string) (nodeID string, gen, seq uint64, err error) {
	parts, ok := splitUnder(name, ReportPrefix, 2)
	if !ok {
		return "", 0, 0, fmt.Errorf("object %s is not a report (want %s<nodeid>/<generation>-<seq>)", name, ReportPrefix)
	}
	g, s, ok := strings.Cut(parts[1], "-")
	if !ok {
		return "", 0, 0, fmt.Errorf("object %s is not a report (want %s<nodeid>/<generation>-<seq>)", name, ReportPrefix)
	}
	if gen, err = ParseGeneration(g); err != nil {
		return "", 0, 0, fmt.Errorf("object %s: %w", name, err)
	}
	if seq, err = ParseSeq(s); err != nil {
		return "", 0, 0, fmt.Errorf("object %s: %w", name, err)
	}
	return parts[0], gen, seq, nil
}

// splitUnder returns the n non-empty segments of name below prefix.
func splitUnder(name, prefix string, n int) ([]string, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return nil, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != n {
		return nil, false
	}
	for _, p := range parts {
		if p == "" {
			return nil, false
		}
	}
	return parts, true
}
