// Package fault classifies errors by what the caller should do about them.
//
// The exit status of every command depends on the class of its error, so the
// class travels with the error as a type, never as a string to be matched.
// Packages below the CLI wrap their errors with Refused, Temporary or Usage;
// anything unwrapped is a plain failure. internal/cli maps classes to exit
// codes in exactly one table.
package fault

import (
	"errors"
	"fmt"
)

// Class is what kind of failure an error is.
type Class int

const (
	// Failure is the default: the work could not be done.
	Failure Class = iota
	// Usage means the command line was wrong.
	Usage
	// Refused means a security check said no: a bad signature, a rollback,
	// a revoked identity, a bundle for another recipient.
	Refused
	// Temporary means trying again later may succeed: a lock is held, the
	// spool is unreachable or not writable.
	Temporary
	// NodesFailed means the command worked and reports that nodes failed
	// the generation (muster report --fail-on failed).
	NodesFailed
	// NodesOutstanding means the command worked and reports that nodes have
	// not yet applied the generation (muster report --fail-on outstanding).
	NodesOutstanding
)

func (c Class) String() string {
	switch c {
	case Usage:
		return "usage"
	case Refused:
		return "refused"
	case Temporary:
		return "temporary"
	case NodesFailed:
		return "nodes-failed"
	case NodesOutstanding:
		return "nodes-outstanding"
	}
	return "failure"
}

// Error is an error with a class and an optional hint telling the user what
// to do about it.
type Error struct {
	Class Class
	Err   error
	Hint  string
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// New wraps err in class c. A nil err stays nil.
func New(c Class, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Class: c, Err: err}
}

// Refusedf returns a Refused error with a formatted message.
func Refusedf(format string, args ...any) error {
	return &Error{Class: Refused, Err: fmt.Errorf(format, args...)}
}

// Temporaryf returns a Temporary error with a formatted message.
func Temporaryf(format string, args ...any) error {
	return &Error{Class: Temporary, Err: fmt.Errorf(format, args...)}
}

// Usagef returns a Usage error with a formatted message.
func Usagef(format string, args ...any) error {
	return &Error{Class: Usage, Err: fmt.Errorf(format, args...)}
}

// WithHint attaches a hint to err, keeping its class.
func WithHint(err error, hint string) error {
	if err == nil {
		return nil
	}
	var fe *Error
	if errors.As(err, &fe) {
		return &Error{Class: fe.Class, Err: err, Hint: hint}
	}
	return &Error{Class: Failure, Err: err, Hint: hint}
}

// ClassOf returns the class of the outermost classified error in err's chain,
// or Failure.
func ClassOf(err error) Class {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Class
	}
	return Failure
}

// HintOf returns the first hint found in err's chain.
func HintOf(err error) string {
	for err != nil {
		var fe *Error
		if !errors.As(err, &fe) {
			return ""
		}
		if fe.Hint != "" {
			return fe.Hint
		}
		err = fe.Err
	}
	return ""
}
