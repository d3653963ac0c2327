package spool

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/muster-tool/muster/internal/s3client"
)

// s3Requests are the requests the S3 adapter makes of the store. The
// protocol client (*s3client.Client) makes each once; s3Retry wraps it to
// make each with bounded retries.
type s3Requests interface {
	Head(ctx context.Context, key string) (s3client.Object, error)
	Get(ctx context.Context, key string, max int64) ([]byte, error)
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	Delete(ctx context.Context, key string) error
	DeleteMany(ctx context.Context, keys []string) ([]s3client.KeyError, error)
	List(ctx context.Context, q s3client.ListQuery) (s3client.Page, error)
}

// s3Retry makes each request of next with bounded retries: an attempt
// that fails in a way trying again may cure (s3client.Retryable: a 5xx,
// throttling, a timeout, a broken connection) is tried again after an
// exponentially growing, jittered wait, at most attempts times and never
// past budget from the request's start. Every error it returns is a
// *triedError saying how the request was tried.
type s3Retry struct {
	next                s3Requests
	budget              time.Duration
	attempts            int
	backoff, maxBackoff time.Duration
}

// triedError is the error of a request's last attempt, and how the
// request was tried.
type triedError struct {
	err      error
	attempts int
	// noAnswer: the last attempt timed out waiting for the store, or
	// the budget ran out during it.
	noAnswer bool
}

func (e *triedError) Error() string { return e.err.Error() }
func (e *triedError) Unwrap() error { return e.err }

// triesOf returns how the request that failed with err was tried: once,
// unless s3Retry says otherwise.
func triesOf(err error) triedError {
	var t *triedError
	if errors.As(err, &t) {
		return *t
	}
	return triedError{err: err, attempts: 1}
}

func (r *s3Retry) do(ctx context.Context, attempt func(context.Context) error) error {
	bctx, cancel := context.WithTimeout(ctx, r.budget)
	defer cancel()
	delay := r.backoff
	for n := 1; ; n++ {
		err := attempt(bctx)
		if err == nil {
			return nil
		}
		t := &triedError{err: err, attempts: n, noAnswer: s3client.NoAnswer(err)}
		if bctx.Err() != nil || n >= r.attempts || !s3client.Retryable(err) {
			return t
		}
		if !sleep(bctx, delay) {
			// The budget ran out while waiting: the last attempt's
			// error says what went wrong.
			return t
		}
		delay = min(2*delay, r.maxBackoff)
	}
}

// sleep waits d give or take a quarter, so that many clients retrying at
// once do not hit the store in step. It reports false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	d = d*3/4 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *s3Retry) Head(ctx context.Context, key string) (obj s3client.Object, err error) {
	err = r.do(ctx, func(ctx context.Context) error {
		obj, err = r.next.Head(ctx, key)
		return err
	})
	return obj, err
}

func (r *s3Retry) Get(ctx context.Context, key string, max int64) (data []byte, err error) {
	err = r.do(ctx, func(ctx context.Context) error {
		data, err = r.next.Get(ctx, key, max)
		return err
	})
	return data, err
}

func (r *s3Retry) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return r.do(ctx, func(ctx context.Context) error { return r.next.PutIfAbsent(ctx, key, data) })
}

func (r *s3Retry) Delete(ctx context.Context, key string) error {
	return r.do(ctx, func(ctx context.Context) error { return r.next.Delete(ctx, key) })
}

// DeleteMany is tried again as a whole: removing a key twice is no error.
func (r *s3Retry) DeleteMany(ctx context.Context, keys []string) (failed []s3client.KeyError, err error) {
	err = r.do(ctx, func(ctx context.Context) error {
		failed, err = r.next.DeleteMany(ctx, keys)
		return err
	})
	return failed, err
}

// List asks for one page; a page that fails is asked for again with the
// same continuation token, so each page has a budget of its own.
func (r *s3Retry) List(ctx context.Context, q s3client.ListQuery) (page s3client.Page, err error) {
	err = r.do(ctx, func(ctx context.Context) error {
		page, err = r.next.List(ctx, q)
		return err
	})
	return page, err
}
