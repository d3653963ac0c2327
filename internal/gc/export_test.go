package gc

// SetPerGeneration sets how many generations gc reads at once, until the
// returned function restores it.
func SetPerGeneration(n int) (restore func()) {
	old := perGeneration
	perGeneration = n
	return func() { perGeneration = old }
}

// RunsDigest and WriteMemo let a test write the file Options.Memo names.
var (
	RunsDigest = runsDigest
	WriteMemo  = writeMemo
)
