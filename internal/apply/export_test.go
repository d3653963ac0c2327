package apply

// For the black-box tests: the fingerprints file's name.
const FingerprintFile = fingerprintFile

// PersistSteps are the steps of the end of a run, in order.
var PersistSteps = persistSteps

// CrashAfter makes runs stop right after the named step of the end of a
// run, as a crash there would; the function it returns undoes it.
func CrashAfter(step string) func() {
	crashAfter = step
	return func() { crashAfter = "" }
}

// ErrCrashed is what a run stopped by CrashAfter returns.
var ErrCrashed = errCrashed
